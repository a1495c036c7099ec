// Reads a cluster's health from its Kubernetes API with the admin kubeconfig: apiserver version,
// readiness checks, nodes, and node usage when metrics-server is installed. One KubeConfig and one
// keep-alive agent per call: parsing the YAML is cheap, and sharing the agent means the parallel
// requests of one pass reuse TLS sessions instead of handshaking for each.
import https from 'node:https';
import {
  ApiException,
  ApisApi,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  Observable,
  VersionApi,
  type ObservableMiddleware,
  type RequestContext,
  type ResponseContext,
  type V1Node,
} from '@kubernetes/client-node';
import { openKubeConnection } from './connection.ts';
import { startBudget, type Budget } from './deadline.ts';
import { KubeApiError, httpError, transportError } from './errors.ts';
import { parseCpuCores, parseMemoryBytes } from './quantity.ts';
import { parseReadyzFailing } from './readyz.ts';
import type { CollectOptions, KubeNode, KubeNodeMetrics, KubeSnapshot } from './types.ts';

export { parseReadyzFailing };

const METRICS_GROUP = 'metrics.k8s.io';

interface Client {
  kc: KubeConfig;
  server: string;
  agent: https.Agent;
  ownsAgent: boolean;
  headers: Record<string, string>;
  callOptions: { middleware: ObservableMiddleware[]; middlewareMergeStrategy: 'append' };
}

async function openClient(kubeconfigYaml: string, signal: AbortSignal, shared?: https.Agent): Promise<Client> {
  const conn = await openKubeConnection(kubeconfigYaml, shared);
  const { kc, server, agent, headers } = conn;
  const ourAgent = !conn.proxied;
  // The object-style API takes observable middleware; this one only pins signal and agent.
  const attach: ObservableMiddleware = {
    pre: (ctx: RequestContext) => {
      ctx.setSignal(signal);
      if (ourAgent) ctx.setAgent(agent);
      return new Observable(Promise.resolve(ctx));
    },
    post: (res: ResponseContext) => new Observable(Promise.resolve(res)),
  };
  return { kc, server, agent, ownsAgent: conn.ownAgent, headers, callOptions: { middleware: [attach], middlewareMergeStrategy: 'append' } };
}

function classify(endpoint: string, err: unknown): KubeApiError {
  if (err instanceof KubeApiError) return err;
  if (err instanceof ApiException) return httpError(endpoint, err.code, err.body);
  return transportError(endpoint, err);
}

async function call<T>(budget: Budget, endpoint: string, work: () => Promise<T>): Promise<T> {
  try {
    return await budget.bound(endpoint, work);
  } catch (err) {
    throw classify(endpoint, err);
  }
}

/** GET returning status and text; for endpoints the typed API does not model (/readyz?verbose). */
function rawGet(client: Client, path: string, signal: AbortSignal): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      `${client.server}${path}`,
      { agent: client.agent, headers: { ...client.headers, accept: 'text/plain' }, signal },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
  });
}

function isoOrNull(t: Date | string | undefined): string | null {
  if (t === undefined) return null;
  const d = t instanceof Date ? t : new Date(t);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

function safeQuantity(q: string | undefined, parse: (s: string) => number): number | null {
  if (q === undefined) return null;
  try {
    return parse(q);
  } catch {
    return null;
  }
}

export function toKubeNode(n: V1Node): KubeNode {
  const conditions = n.status?.conditions ?? [];
  const ready = conditions.find((c) => c.type === 'Ready');
  const status = ready?.status === 'True' || ready?.status === 'False' ? ready.status : 'Unknown';
  const roles = Object.keys(n.metadata?.labels ?? {})
    .filter((l) => l.startsWith('node-role.kubernetes.io/'))
    .map((l) => l.slice('node-role.kubernetes.io/'.length))
    .filter((r) => r.length > 0)
    .sort();
  const cpu = safeQuantity(n.status?.capacity?.cpu, parseCpuCores);
  const memory = safeQuantity(n.status?.capacity?.memory, parseMemoryBytes);
  return {
    name: n.metadata?.name ?? '',
    ready: status,
    readySince: isoOrNull(ready?.lastTransitionTime),
    kubeletVersion: n.status?.nodeInfo?.kubeletVersion ?? '',
    addresses: (n.status?.addresses ?? []).map((a) => ({ type: a.type, address: a.address })),
    unschedulable: n.spec?.unschedulable === true,
    roles,
    pressure: conditions.filter((c) => c.type !== 'Ready' && c.status === 'True').map((c) => c.type),
    capacity: cpu !== null && memory !== null ? { cpuCores: cpu, memoryBytes: memory } : null,
  };
}

interface MetricsItem {
  metadata?: { name?: string };
  timestamp?: string;
  usage?: { cpu?: string; memory?: string };
}

export function toNodeMetrics(list: unknown): KubeNodeMetrics[] {
  const items = (list as { items?: MetricsItem[] } | null)?.items ?? [];
  const out: KubeNodeMetrics[] = [];
  for (const it of items) {
    const cpu = safeQuantity(it.usage?.cpu, parseCpuCores);
    const memory = safeQuantity(it.usage?.memory, parseMemoryBytes);
    if (!it.metadata?.name || cpu === null || memory === null) continue;
    out.push({ name: it.metadata.name, cpuCores: cpu, memoryBytes: memory, timestamp: isoOrNull(it.timestamp) });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

async function fetchMetrics(
  client: Client,
  budget: Budget,
): Promise<Pick<KubeSnapshot, 'metrics' | 'metricsError'>> {
  const endpoint = `GET ${client.server}/apis/${METRICS_GROUP}/v1beta1/nodes`;
  const api = client.kc.makeApiClient(CustomObjectsApi);
  try {
    const list: unknown = await call(budget, endpoint, () =>
      api.listClusterCustomObject({ group: METRICS_GROUP, version: 'v1beta1', plural: 'nodes' }, client.callOptions),
    );
    return { metrics: toNodeMetrics(list) };
  } catch (err) {
    const e = err as KubeApiError;
    // Usage is optional: the snapshot stands without it, so no failure here sinks the pass.
    if (e.status === 404) return { metrics: null };
    return { metrics: null, metricsError: e.message };
  }
}

/**
 * Collects a KubeSnapshot. Rejects with KubeApiError when the API cannot be read (the first
 * failure in the order version, readyz, nodes, discovery); a missing metrics API is not an error.
 */
export async function collectKubernetes(
  kubeconfigYaml: string,
  opts: CollectOptions & {
    /**
     * A keep-alive agent carrying the kubeconfig's TLS client identity, kept by the caller across
     * collections so a pass every minute reuses its connections; not destroyed here. Ignored when
     * the kubeconfig names a proxy.
     */
    agent?: https.Agent;
  },
): Promise<KubeSnapshot> {
  const budget = startBudget(opts.deadlineMs, opts.signal);
  let client: Client | undefined;
  try {
    client = await openClient(kubeconfigYaml, budget.signal, opts.agent);
    const c = client;
    const at = (path: string): string => `GET ${c.server}${path}`;
    const versionApi = c.kc.makeApiClient(VersionApi);
    const coreApi = c.kc.makeApiClient(CoreV1Api);
    const apisApi = c.kc.makeApiClient(ApisApi);

    const settled = await Promise.allSettled([
      call(budget, at('/version'), () => versionApi.getCode({}, c.callOptions)),
      call(budget, at('/readyz?verbose'), async () => {
        const r = await rawGet(c, '/readyz?verbose', budget.signal);
        if (r.status === 200) return { ok: true, failing: [] as string[] };
        if (r.status === 401 || r.status === 403) throw httpError(at('/readyz?verbose'), r.status, r.text);
        return { ok: false, failing: parseReadyzFailing(r.text) };
      }),
      call(budget, at('/api/v1/nodes'), () => coreApi.listNode({}, c.callOptions)),
      call(budget, at('/apis'), () => apisApi.getAPIVersions({}, c.callOptions)),
    ] as const);
    for (const s of settled) if (s.status === 'rejected') throw s.reason;
    const [version, readyz, nodes, groups] = settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as [
      Awaited<ReturnType<VersionApi['getCode']>>,
      KubeSnapshot['readyz'],
      Awaited<ReturnType<CoreV1Api['listNode']>>,
      Awaited<ReturnType<ApisApi['getAPIVersions']>>,
    ];

    const hasMetrics = (groups.groups ?? []).some((g) => g.name === METRICS_GROUP);
    const usage = hasMetrics ? await fetchMetrics(c, budget) : { metrics: null };

    return {
      server: c.server,
      collectedAt: new Date().toISOString(),
      version: {
        gitVersion: version.gitVersion,
        major: version.major,
        minor: version.minor,
        platform: version.platform,
      },
      readyz,
      nodes: (nodes.items ?? []).map(toKubeNode).sort((a, b) => a.name.localeCompare(b.name)),
      ...usage,
    };
  } finally {
    budget.dispose();
    if (client?.ownsAgent) client.agent.destroy();
  }
}
