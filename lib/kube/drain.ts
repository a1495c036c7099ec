// Cordon, drain and uncordon a node the way `kubectl drain` (and so talosctl upgrade) does:
// DaemonSet pods and mirror pods stay, every other pod goes through the Eviction API so
// PodDisruptionBudgets are honoured, pods with emptyDir data are evicted too, and a 429 from a
// budget is retried until the drain's time is up.
import type https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DialGuard } from '../dial-guard.ts';
import { openKubeConnection } from './connection.ts';
import { KubeApiError, httpError, transportError } from './errors.ts';
import { kubeRequest } from './http.ts';

export interface KubeWriter {
  server: string;
  request(method: string, path: string, opts?: { body?: unknown; contentType?: string; signal?: AbortSignal }): Promise<{ status: number; body: unknown; retryAfterMs?: number }>;
  close(): void;
}

/**
 * An HTTPS client authenticated as the kubeconfig's current user (client certificate or token).
 * `agent` shares a caller's keep-alive agent, so a run's drains, uncordons and health reads reuse
 * their TLS connections; the writer then leaves it open on close. Each request gets `deadlineMs`.
 */
export async function openKubeWriter(kubeconfigYaml: string, deadlineMs: number, opts: { agent?: https.Agent; guard?: DialGuard | undefined } = {}): Promise<KubeWriter> {
  const conn = openKubeConnection(kubeconfigYaml, opts.agent, opts.guard);
  const host = new URL(conn.server).host;

  return {
    server: host,
    async request(method, path, opts = {}) {
      const endpoint = `${method} ${host}${path.split('?')[0]}`;
      const deadline = AbortSignal.timeout(deadlineMs);
      const signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
      try {
        const r = await kubeRequest(conn, method, path, {
          body: opts.body,
          ...(opts.contentType ? { contentType: opts.contentType } : {}),
          signal,
        });
        return { status: r.status, body: r.body, ...(r.retryAfterMs !== undefined ? { retryAfterMs: r.retryAfterMs } : {}) };
      } catch (e) {
        if (deadline.aborted && !opts.signal?.aborted) throw new KubeApiError('deadline', `${endpoint}: no answer within the ${deadlineMs} ms deadline`);
        throw transportError(endpoint, e);
      }
    },
    close: () => {
      if (conn.ownAgent) conn.agent.destroy();
    },
  };
}

/** `PATCH host:6443/api/v1/nodes/n1`: what a message names a request by (never its query). */
export const endpoint = (w: KubeWriter, method: string, path: string): string => `${method} ${w.server}${path.split('?')[0]}`;

/** The answer's body; any status but 2xx is an error naming the endpoint (never the query). */
export async function expectOk(w: KubeWriter, method: string, path: string, opts: Parameters<KubeWriter['request']>[2]): Promise<unknown> {
  const r = await w.request(method, path, opts);
  if (r.status < 200 || r.status > 299) throw httpError(endpoint(w, method, path), r.status, r.body, r.retryAfterMs);
  return r.body;
}

/** What `path` serves; undefined when the server has nothing there (404). */
export async function getIfExists(w: KubeWriter, path: string, signal?: AbortSignal): Promise<unknown> {
  const r = await w.request('GET', path, signal ? { signal } : {});
  if (r.status === 404) return undefined;
  if (r.status < 200 || r.status > 299) throw httpError(endpoint(w, 'GET', path), r.status, r.body, r.retryAfterMs);
  return r.body;
}

/**
 * Marks the node (un)schedulable with a merge patch of `spec.unschedulable`, as kubectl cordon does.
 * `annotations` ride in the same PATCH (null removes one), so a mark saying who cordoned the node
 * can never be out of step with the cordon itself.
 */
export async function setUnschedulable(w: KubeWriter, node: string, unschedulable: boolean, signal?: AbortSignal, annotations?: Record<string, string | null>): Promise<void> {
  await expectOk(w, 'PATCH', `/api/v1/nodes/${encodeURIComponent(node)}`, {
    body: { ...(annotations ? { metadata: { annotations } } : {}), spec: { unschedulable: unschedulable ? true : null } },
    contentType: 'application/strategic-merge-patch+json',
    ...(signal ? { signal } : {}),
  });
}

export interface PodRef {
  namespace: string;
  name: string;
}

interface PodItem {
  metadata?: {
    name?: string;
    namespace?: string;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ kind?: string; controller?: boolean }>;
    deletionTimestamp?: string;
  };
}

/** A pod a drain evicts; `deleting` when the list showed it already being deleted (a deletionTimestamp). */
export type EvictablePod = PodRef & { deleting?: boolean };

export interface NodePods {
  /** Pods a drain evicts. */
  evict: EvictablePod[];
  /** DaemonSet and mirror pods, which a drain leaves in place. */
  skipped: Array<PodRef & { why: 'daemonset' | 'mirror' }>;
}

export async function podsOnNode(w: KubeWriter, node: string, signal?: AbortSignal): Promise<NodePods> {
  const selector = encodeURIComponent(`spec.nodeName=${node}`);
  const list = (await expectOk(w, 'GET', `/api/v1/pods?fieldSelector=${selector}`, signal ? { signal } : {})) as { items?: PodItem[] };
  const out: NodePods = { evict: [], skipped: [] };
  for (const p of list.items ?? []) {
    const ref = { namespace: p.metadata?.namespace ?? 'default', name: p.metadata?.name ?? '' };
    if (p.metadata?.annotations?.['kubernetes.io/config.mirror'] !== undefined) out.skipped.push({ ...ref, why: 'mirror' });
    else if ((p.metadata?.ownerReferences ?? []).some((o) => o.controller && o.kind === 'DaemonSet')) out.skipped.push({ ...ref, why: 'daemonset' });
    else out.evict.push(p.metadata?.deletionTimestamp ? { ...ref, deleting: true } : ref);
  }
  return out;
}

/** `deleting`: the pod is already on its way out and can no longer be evicted; the drain waits for it. */
export type EvictionOutcome = 'evicted' | 'gone' | 'deleting' | 'blocked';

const podPath = (pod: PodRef): string => `/api/v1/namespaces/${encodeURIComponent(pod.namespace)}/pods/${encodeURIComponent(pod.name)}`;

/** The apiserver's NamespaceLifecycle admission refusing any create (an eviction too) in a namespace being deleted. */
function namespaceTerminating(status: number, body: unknown): boolean {
  const causes = (body as { details?: { causes?: Array<{ type?: string }> } } | null)?.details?.causes;
  return status === 403 && Array.isArray(causes) && causes.some((c) => c.type === 'NamespaceTerminating');
}

/**
 * POSTs an Eviction; a 429 means a disruption budget (or the apiserver) refuses for now. In a
 * namespace being deleted no eviction can succeed: a pod already marked deleted is waited for, as
 * kubectl drain does, and one not marked yet is looked at again on the next retry, by when the
 * namespace controller has usually deleted it.
 */
export async function evictPod(w: KubeWriter, pod: EvictablePod, signal?: AbortSignal): Promise<{ outcome: EvictionOutcome; message: string; retryAfterMs?: number }> {
  const path = `${podPath(pod)}/eviction`;
  const r = await w.request('POST', path, {
    body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod.name, namespace: pod.namespace } },
    ...(signal ? { signal } : {}),
  });
  const message = typeof r.body === 'object' && r.body !== null ? String((r.body as { message?: unknown }).message ?? '') : String(r.body).slice(0, 200);
  if (r.status === 404) return { outcome: 'gone', message };
  if (r.status === 429) return { outcome: 'blocked', message, ...(r.retryAfterMs !== undefined ? { retryAfterMs: r.retryAfterMs } : {}) };
  if (namespaceTerminating(r.status, r.body)) {
    if (pod.deleting) return { outcome: 'deleting', message };
    const now = (await getIfExists(w, podPath(pod), signal)) as PodItem | undefined;
    if (!now) return { outcome: 'gone', message };
    return { outcome: now.metadata?.deletionTimestamp ? 'deleting' : 'blocked', message };
  }
  if (r.status < 200 || r.status > 299) throw httpError(`POST ${w.server}${path}`, r.status, r.body);
  return { outcome: 'evicted', message };
}

export class DrainTimeoutError extends Error {
  override readonly name = 'DrainTimeoutError';
  constructor(
    message: string,
    readonly remaining: Array<PodRef & { reason: string }>,
  ) {
    super(message);
  }
}

export interface DrainOptions {
  timeoutMs: number;
  /** Pause between eviction retries and between checks that evicted pods are gone. */
  retryMs: number;
  signal?: AbortSignal;
  /** Set on the node with the cordon (see setUnschedulable). */
  annotations?: Record<string, string>;
  /** false: the node is cordoned already and its cordon is left as it is (no PATCH). */
  cordon?: boolean;
  onEvent?: (e: { type: 'skip' | 'evict' | 'blocked' | 'gone'; pod: PodRef; message?: string }) => void | Promise<void>;
}

const refName = (p: PodRef): string => `${p.namespace}/${p.name}`;

/**
 * Cordons `node`, then evicts its pods until none is left or the time is up. Pods are evicted
 * concurrently, each retried while its budget refuses; a pod counts as drained only once it has
 * disappeared from the node. Throws DrainTimeoutError naming the pods still there and why.
 */
export async function drainNode(w: KubeWriter, node: string, opts: DrainOptions): Promise<{ evicted: PodRef[]; skipped: NodePods['skipped'] }> {
  const deadline = performance.now() + opts.timeoutMs;
  if (opts.cordon !== false) await setUnschedulable(w, node, true, opts.signal, opts.annotations);
  const pods = await podsOnNode(w, node, opts.signal);
  for (const s of pods.skipped) await opts.onEvent?.({ type: 'skip', pod: s, message: s.why });
  const waitOrTimeout = async (ms = opts.retryMs, signal = opts.signal): Promise<boolean> => {
    const left = deadline - performance.now();
    if (left <= 0) return false;
    await sleep(Math.min(ms, left), undefined, signal ? { signal } : {});
    return true;
  };
  // Terminating pods are checked tightly at first, then less and less often: the reboot waits on
  // them, and a long grace period should not turn into a stream of LISTs.
  let goneCheckMs = Math.min(opts.retryMs, 20);
  const goneCheckMaxMs = Math.min(opts.retryMs, 250);

  // One eviction failing ends the drain, and with it the others' retries: left running, they
  // would go on evicting from a node the run has already reported as not drained.
  const failed = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, failed.signal]) : failed.signal;
  const reasons = new Map<string, string>();
  const evictOne = async (pod: EvictablePod): Promise<void> => {
    for (;;) {
      const r = await evictPod(w, pod, signal);
      if (r.outcome !== 'blocked') {
        if (r.outcome === 'evicted') await opts.onEvent?.({ type: 'evict', pod });
        return;
      }
      reasons.set(refName(pod), r.message || 'eviction refused (429)');
      await opts.onEvent?.({ type: 'blocked', pod, message: r.message });
      const asked = r.retryAfterMs ?? 0;
      // Not sooner than the server asked. When that is past the drain's end there is no attempt
      // left to make: the drain ends there, with this pod's refusal as the reason.
      if (asked > deadline - performance.now()) return void (await waitOrTimeout(asked, signal));
      if (!(await waitOrTimeout(Math.max(opts.retryMs, asked), signal))) return;
    }
  };
  const evictions = await Promise.allSettled(
    pods.evict.map((pod) =>
      evictOne(pod).catch((err: unknown) => {
        if (!failed.signal.aborted) failed.abort(err);
        throw err;
      }),
    ),
  );
  // The first failure, not the aborts it caused in the others.
  if (evictions.some((e) => e.status === 'rejected')) throw failed.signal.reason;

  // Evicted pods terminate in their own time; the node is drained when they are gone.
  const wanted = new Set(pods.evict.map(refName));
  for (;;) {
    const still = (await podsOnNode(w, node, opts.signal)).evict.filter((p) => wanted.has(refName(p)));
    if (still.length === 0) {
      for (const p of pods.evict) await opts.onEvent?.({ type: 'gone', pod: p });
      return { evicted: pods.evict, skipped: pods.skipped };
    }
    const waited = await waitOrTimeout(goneCheckMs);
    goneCheckMs = Math.min(goneCheckMaxMs, Math.ceil(goneCheckMs * 1.25));
    if (!waited) {
      const remaining = still.map((p) => ({ ...p, reason: reasons.get(refName(p)) ?? 'still terminating' }));
      const text = remaining.map((p) => `${refName(p)} (${p.reason})`).join(', ');
      throw new DrainTimeoutError(`drain of ${node} did not finish within ${Math.round(opts.timeoutMs / 1000)}s: ${text}`, remaining);
    }
  }
}
