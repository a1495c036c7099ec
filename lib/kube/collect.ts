// Reads a cluster's health from its Kubernetes API with the admin kubeconfig: apiserver version,
// readiness checks, nodes, and node usage when metrics-server is installed. One kubeconfig reading
// and one keep-alive agent per call (unless the caller keeps one): parsing the YAML is cheap, and
// sharing the agent means the parallel requests of one pass reuse TLS sessions.
import type https from 'node:https';
import type { DialGuard } from '../dial-guard.ts';
import { openKubeConnection, type KubeConnection } from './connection.ts';
import { startBudget, type Budget } from './deadline.ts';
import { KubeApiError, httpError, transportError } from './errors.ts';
import { kubeRequest } from './http.ts';
import { parseCpuCores, parseMemoryBytes } from './quantity.ts';
import { parseReadyzFailing } from './readyz.ts';
import type { KubeTarget } from './kubeconfig.ts';
import type { APIGroupList, CollectOptions, KubeNode, KubeNodeMetrics, KubeSnapshot, NodeList, NodeObject, VersionInfo } from './types.ts';

export { parseReadyzFailing };

const METRICS_GROUP = 'metrics.k8s.io';

async function call<T>(budget: Budget, endpoint: string, work: () => Promise<T>): Promise<T> {
  try {
    return await budget.bound(endpoint, work);
  } catch (err) {
    throw err instanceof KubeApiError ? err : transportError(endpoint, err);
  }
}

/** GET of a JSON document inside the budget; any status but 2xx is a KubeApiError. */
function getJson<T>(c: KubeConnection, budget: Budget, path: string): Promise<T> {
  const endpoint = `GET ${c.server}${path}`;
  return call(budget, endpoint, async () => {
    const r = await kubeRequest(c, 'GET', path, { signal: budget.signal });
    if (r.status < 200 || r.status > 299) throw httpError(endpoint, r.status, r.body, r.retryAfterMs);
    return r.body as T;
  });
}

function isoOrNull(t: string | undefined): string | null {
  if (t === undefined) return null;
  const d = new Date(t);
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

export function toKubeNode(n: NodeObject): KubeNode {
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
    addresses: (n.status?.addresses ?? []).map((a) => ({ type: a.type ?? '', address: a.address ?? '' })),
    unschedulable: n.spec?.unschedulable === true,
    roles,
    pressure: conditions.filter((c) => c.type !== 'Ready' && c.status === 'True').map((c) => c.type ?? ''),
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

async function fetchMetrics(c: KubeConnection, budget: Budget): Promise<Pick<KubeSnapshot, 'metrics' | 'metricsError'>> {
  try {
    return { metrics: toNodeMetrics(await getJson<unknown>(c, budget, `/apis/${METRICS_GROUP}/v1beta1/nodes`)) };
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
  /** An admin kubeconfig, or its target when the caller keeps one across collections (no YAML to parse each time). */
  kubeconfig: string | KubeTarget,
  opts: CollectOptions & {
    /**
     * A keep-alive agent carrying the kubeconfig's TLS client identity, kept by the caller across
     * collections so a pass every minute reuses its connections; not destroyed here.
     */
    agent?: https.Agent;
    /** Where a connection made here may go (REZUS_NODE_NETWORKS); an agent given carries its own. */
    guard?: DialGuard | undefined;
  },
): Promise<KubeSnapshot> {
  const budget = startBudget(opts.deadlineMs, opts.signal);
  let conn: KubeConnection | undefined;
  try {
    conn = openKubeConnection(kubeconfig, opts.agent, opts.guard);
    const c = conn;
    const readyzAt = `GET ${c.server}/readyz?verbose`;

    const settled = await Promise.allSettled([
      getJson<VersionInfo>(c, budget, '/version'),
      call(budget, readyzAt, async () => {
        const r = await kubeRequest(c, 'GET', '/readyz?verbose', { accept: 'text/plain', signal: budget.signal });
        if (r.status === 200) return { ok: true, failing: [] as string[] };
        if (r.status === 401 || r.status === 403) throw httpError(readyzAt, r.status, r.text);
        return { ok: false, failing: parseReadyzFailing(r.text) };
      }),
      getJson<NodeList>(c, budget, '/api/v1/nodes'),
      getJson<APIGroupList>(c, budget, '/apis'),
    ] as const);
    for (const s of settled) if (s.status === 'rejected') throw s.reason;
    const [version, readyz, nodes, groups] = settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as [
      VersionInfo,
      KubeSnapshot['readyz'],
      NodeList,
      APIGroupList,
    ];

    const hasMetrics = (groups.groups ?? []).some((g) => g.name === METRICS_GROUP);
    const usage = hasMetrics ? await fetchMetrics(c, budget) : { metrics: null };

    return {
      server: c.server,
      collectedAt: new Date().toISOString(),
      version: {
        gitVersion: version.gitVersion ?? '',
        major: version.major ?? '',
        minor: version.minor ?? '',
        platform: version.platform ?? '',
      },
      readyz,
      nodes: (nodes.items ?? []).map(toKubeNode).sort((a, b) => a.name.localeCompare(b.name)),
      ...usage,
    };
  } finally {
    budget.dispose();
    if (conn?.ownAgent) conn.agent.destroy();
  }
}
