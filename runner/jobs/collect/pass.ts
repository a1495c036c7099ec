// One collect pass: for every cluster in scope, read each configured node's Talos API and the
// cluster's Kubernetes API (bounded concurrency shared by the whole pass), assess, store, and
// finally apply retention. A cluster or node that fails is recorded as such; it never sinks the pass.
import { and, eq, inArray } from 'drizzle-orm';
import { clusters, machines } from '../../../db/schema/index.ts';
import { collectKubernetes, KubeApiError, loadKubernetesClient, type KubeSnapshot } from '../../../lib/kube/index.ts';
import type { RunEventInput } from '../../../lib/jobs/types.ts';
import type { Deps } from '../../../functions/context.ts';
import type { ClusterRow, MachineRow } from '../../../functions/inventory/load.ts';
import { talosAddressOf, talosDialer } from '../../../functions/machine-config/access.ts';
import { collectAccessCache, type CollectAccess } from './access-cache.ts';
import { assessCluster, isFailed } from './assess.ts';
import { createLimiter, type Limiter } from './limit.ts';
import { applyRetention, type RetentionResult } from './retention.ts';
import { previousCpuOf, storePassOutcomes, type ClusterOutcome, type MachineOutcome, type SkippedMachine } from './store.ts';
import { callError, readNode, type NodeRead } from './talos-read.ts';
import type { TalosApiClient } from '../../../lib/talos/api/index.ts';
import { errorMessage } from '../../../lib/errors.ts';
import type { CallError, Failed, HealthState, MachineInput, TalosCpuStat } from '../../../functions/collect/types.ts';

export interface PassScope {
  /** Only this cluster. */
  clusterId?: string;
  /** Only this tenant's clusters. */
  tenantId?: string;
}

export interface PassOptions extends PassScope {
  signal?: AbortSignal;
  emit?: (e: RunEventInput) => Promise<void>;
}

export interface PassSummary {
  clusters: number;
  machines: number;
  reached: number;
  states: Record<HealthState, number>;
  durationMs: number;
  retention: RetentionResult;
}

export const LOCAL_SKIP = 'local machine: nothing runs at its address, so it is not collected';

/** Machines a pass reads: config delivered (or created with it by tofu) and somewhere to dial. */
export function skipReason(m: Pick<MachineRow, 'provider' | 'state' | 'address' | 'ipv4' | 'ipv6'>): string | null {
  // The quick start's machines: their addresses come from the documentation ranges, no node answers there.
  if (m.provider === 'local') return LOCAL_SKIP;
  if (m.state === 'new') return 'not configured yet';
  if (!talosAddressOf(m)) return 'no address to reach the Talos API';
  return null;
}

const kubeFailure = (err: unknown): Failed => ({
  error: err instanceof KubeApiError ? { code: err.code, message: err.message } : { code: 'internal', message: errorMessage(err) },
});

interface Target {
  machine: MachineRow;
  read: NodeRead;
}

/** Concurrency limits of a pass: dialing waits on the network, reading costs CPU. */
interface PassLimits {
  read: Limiter;
  dial: Limiter;
  /** Minting the clusters' Talos credentials, MINTS_AT_ONCE at a time. */
  mint: Limiter;
  /** Settles once every dial of the pass has started (see readTarget). */
  dialsStarted(): Promise<void>;
}

/** Settles once each of `keys` was marked done (a key marked twice counts once). */
function countdown(keys: readonly string[]): { done(key: string): void; all: Promise<void> } {
  const left = new Set(keys);
  let resolve!: () => void;
  const all = new Promise<void>((r) => (resolve = r));
  if (left.size === 0) resolve();
  return {
    all,
    done: (key) => {
      if (left.delete(key) && left.size === 0) resolve();
    },
  };
}

/**
 * How many nodes a pass may be dialing at once, per node it may be reading. A dial mostly waits
 * (TCP, handshake, or a node that never answers), so it does not take a read slot: holding one for
 * the whole deadline of a dead node pushed every node queued behind it, and the pass ended one
 * deadline after the last dead node was reached. Reads wait for the dials (readTarget), so the
 * handshakes of a cold pass have the CPU to themselves. Four dials per read slot start the dead
 * nodes' deadlines sooner than two (bench/collect, alternated runs on 2 cores: cold pass 1.31–1.67×
 * against 1.47–1.82×). Eight once ended a pass with every node unreachable (not seen again in three
 * more runs), so the margin is kept.
 */
const DIALS_PER_READ = 4;

/**
 * Clusters whose Talos credentials are minted at once. Minting is CPU-bound (a few milliseconds a
 * cluster on a cold runner): minted all together they were all ready only at the end, and no node
 * was dialled before; a few at a time, a cluster's nodes are dialled as soon as it has them, and
 * the steps minting hands to the thread pool (key generation, signing) overlap. One at a time
 * left the event loop idle between those steps and paced the dials of a cold pass.
 */
const MINTS_AT_ONCE = 4;

// Dials first (its own limit), then reads with a read slot: a node that never connects costs its
// deadline in parallel with everything else, not a read slot, and a node whose dial failed is
// recorded with that failure, not read (the read would dial it again, in a read slot). A connected
// node's read waits until every dial of the pass has started: the pass cannot end before the last
// dead node's deadline, which runs from its dial, so reads interleaved with the dials of a cold
// pass (handshakes, all CPU) pushed that start, and the end, later; read after the dials, they
// overlap those deadlines. A read's own deadlines run from its calls, so the wait costs it nothing.
// The channel stays open for the next pass unless the read failed: a node that did not answer (or
// refused us) is dialled afresh next time rather than left reconnecting in the background.
async function readTarget(access: CollectAccess, address: string, m: MachineRow, limits: PassLimits, opts: { deadlineMs: number; signal?: AbortSignal }): Promise<NodeRead> {
  let read: NodeRead;
  try {
    const first = await dialTarget(access, address, limits, opts);
    await limits.dialsStarted();
    read = await limits.read(() => readNode(first.client, m.role, opts));
    if (first.reused && lostConnection(read)) {
      // A node that rebooted without closing its connections (power cut, watchdog reset) resets
      // the one kept from an earlier pass; a fresh dial may well reach it. Collect reads are
      // idempotent; once, so a node really down is reported with the fresh dial's reason.
      await access.discard(address);
      const fresh = await dialTarget(access, address, limits, opts);
      read = await limits.read(() => readNode(fresh.client, m.role, opts));
    }
  } catch (err) {
    read = { talos: { error: callError(err) }, hostname: null, partialError: null };
  }
  if (isFailed(read.talos)) await access.discard(address).catch(() => {});
  return read;
}

/** The node's pooled client, connected; throws the dial's failure. */
function dialTarget(access: CollectAccess, address: string, limits: PassLimits, opts: { deadlineMs: number; signal?: AbortSignal }): Promise<{ client: TalosApiClient; reused: boolean }> {
  // Handed to the dial limiter at once (not after an await), so a cluster's dials are queued
  // by the time it tells the pass so (collectCluster).
  return limits.dial(async () => {
    const client = await access.talosClient(address);
    const connection = await client.connect(opts);
    if (connection.failure) throw connection.failure;
    return { client, reused: connection.reused };
  });
}

/** The read failed because its connection went away under it (reset, hang-up), not for the node's answer or silence. */
const lostConnection = (read: NodeRead): boolean => isFailed(read.talos) && read.talos.error.code === 'connection-lost';

/** `dialsQueued` is called once every dial of the cluster is queued (or there is none). */
async function collectCluster(
  deps: Deps,
  cluster: ClusterRow,
  rows: MachineRow[],
  limits: PassLimits,
  at: number,
  signal: AbortSignal | undefined,
  previous: Map<string, TalosCpuStat>,
  dialsQueued: () => void,
): Promise<ClusterOutcome> {
  const deadlineMs = deps.settings.collectDeadlineMs;
  const skipped: SkippedMachine[] = [];
  const targets: MachineRow[] = [];
  // Mesh nodes are read at their overlay address (lib/mesh/dial.ts), the Kubernetes API too.
  const dial = await talosDialer(deps, cluster.id);
  for (const m of rows) {
    const why = skipReason({ ...m, address: dial(m) });
    if (why) skipped.push({ id: m.id, reason: why });
    else targets.push(m);
  }
  const base = { clusterId: cluster.id, at, skipped };
  if (targets.length === 0) {
    const why = skipped.length > 0 && skipped.every((s) => s.reason === LOCAL_SKIP) ? 'local machines only: nothing to collect' : 'no configured machines to collect yet';
    return { ...base, rollup: { state: 'unknown', reasons: [why], kubernetesVersion: null, talosVersions: [], etcd: null }, kubeError: null, machines: [] };
  }

  let access: CollectAccess;
  try {
    access = collectAccessCache(deps).access(deps, { ...cluster, endpoint: dial.kubeEndpoint(cluster, rows) });
  } catch (err) {
    // No secrets, so no credentials: nothing can be read, and nothing is known.
    const error: CallError = { code: 'unauthenticated', message: `no cluster credentials: ${errorMessage(err)}` };
    return finish(cluster, base, targets.map((machine) => ({ machine, read: { talos: { error }, hostname: null, partialError: null } })), { error }, previous);
  }
  const opts = { deadlineMs, ...(signal ? { signal } : {}) };
  await limits.mint(() => access.talosReady());
  const reads = targets.map(async (machine): Promise<Target> => ({ machine, read: await readTarget(access, dial(machine)!, machine, limits, opts) }));
  dialsQueued();
  // Like a node's read, after every dial has started (readTarget).
  const kube = limits.dialsStarted().then(() => limits.read(async (): Promise<KubeSnapshot | Failed> => {
    try {
      const { target, agent } = await access.kube();
      return await collectKubernetes(target, { deadlineMs, agent, ...(signal ? { signal } : {}) });
    } catch (err) {
      return kubeFailure(err);
    }
  }));
  return finish(cluster, base, await Promise.all(reads), await kube, previous);
}

function finish(
  cluster: ClusterRow,
  base: Pick<ClusterOutcome, 'clusterId' | 'at' | 'skipped'>,
  targets: Target[],
  kube: KubeSnapshot | Failed,
  previous: Map<string, TalosCpuStat>,
): ClusterOutcome {
  const inputs: MachineInput[] = targets.map(({ machine, read }) => {
    const prev = previous.get(machine.id);
    return { id: machine.id, name: read.hostname ?? machine.name, role: machine.role, talos: read.talos, ...(prev ? { previousCpu: prev } : {}) };
  });
  const assessment = assessCluster({
    machines: inputs,
    kube,
    expected: { talosVersion: cluster.talosVersion, kubernetesVersion: cluster.kubernetesVersion },
    now: base.at,
  });
  const outcomes: MachineOutcome[] = assessment.machines.map((a, i) => {
    const { read } = targets[i]!;
    const failed = isFailed(read.talos);
    return {
      assessment: a,
      reached: !failed,
      error: failed ? (read.talos as Failed).error.message : read.partialError,
      previousCpu: failed ? null : ((read.talos as Exclude<NodeRead['talos'], Failed>).systemStat?.cpuTotal ?? null),
    };
  });
  return {
    ...base,
    rollup: { state: assessment.state, reasons: assessment.reasons, kubernetesVersion: assessment.kubernetesVersion, talosVersions: assessment.talosVersions, etcd: assessment.etcd },
    kubeError: isFailed(kube) ? kube.error.message : null,
    machines: outcomes,
  };
}

async function clustersInScope(deps: Deps, scope: PassScope): Promise<ClusterRow[]> {
  return deps.db
    .select()
    .from(clusters)
    .where(and(scope.clusterId ? eq(clusters.id, scope.clusterId) : undefined, scope.tenantId ? eq(clusters.tenantId, scope.tenantId) : undefined))
    .orderBy(clusters.id);
}

export async function runCollectPass(deps: Deps, opts: PassOptions = {}): Promise<PassSummary> {
  const started = performance.now();
  const at = deps.clock.now();
  const emit = opts.emit ?? (async () => {});
  const list = await clustersInScope(deps, opts);
  const rows = list.length ? await deps.db.select().from(machines).where(inArray(machines.clusterId, list.map((c) => c.id))) : [];
  const byCluster = new Map<string, MachineRow[]>();
  for (const m of rows) byCluster.set(m.clusterId, [...(byCluster.get(m.clusterId) ?? []), m]);

  const queued = countdown(list.map((c) => c.id));
  const dial = createLimiter(deps.settings.collectConcurrency * DIALS_PER_READ);
  const limits: PassLimits = {
    read: createLimiter(deps.settings.collectConcurrency),
    dial,
    mint: createLimiter(MINTS_AT_ONCE),
    dialsStarted: () => queued.all.then(() => dial.started()),
  };
  const states: Record<HealthState, number> = { healthy: 0, degraded: 0, unreachable: 0, unknown: 0 };
  let reached = 0;
  let machineCount = 0;
  // Before any call starts its deadline: loading the client stalls the event loop.
  if (list.length) await loadKubernetesClient();
  // Every node's CPU counters of the pass before, in one query: the utilisation is their delta.
  const previous = await previousCpuOf(deps, rows.filter((m) => !skipReason(m)).map((m) => m.id));
  const outcomes = await Promise.all(
    list.map((cluster) => {
      const dialsQueued = (): void => queued.done(cluster.id);
      // A cluster that ends early (nothing to dial, no credentials, an error) has no dial left to queue.
      return collectCluster(deps, cluster, byCluster.get(cluster.id) ?? [], limits, at, opts.signal, previous, dialsQueued).finally(dialsQueued);
    }),
  );
  const failed = await storePassOutcomes(deps, outcomes);
  for (const [i, outcome] of outcomes.entries()) {
    const cluster = list[i]!;
    if (failed.has(cluster.id)) {
      // Typically the cluster's machines changed under the pass (one was deleted): the next pass catches up.
      deps.log.warn('collect: storing cluster results failed', { cluster: cluster.id, error: errorMessage(failed.get(cluster.id)) });
      await emit({ level: 'warn', type: 'collect.store_failed', message: `cluster ${cluster.name}: results not stored`, data: { cluster: cluster.id } });
      continue;
    }
    for (const m of outcome.machines) {
      states[m.assessment.state]++;
      if (m.reached) reached++;
    }
    machineCount += outcome.machines.length;
    await emit({
      level: outcome.rollup.state === 'healthy' || outcome.rollup.state === 'unknown' ? 'info' : 'warn',
      type: 'collect.cluster',
      message: `cluster ${cluster.name}: ${outcome.rollup.state}${outcome.rollup.reasons.length ? ` (${outcome.rollup.reasons.length} reason${outcome.rollup.reasons.length === 1 ? '' : 's'})` : ''}`,
      data: { cluster: cluster.id, state: outcome.rollup.state, machines: outcome.machines.length },
    });
  }
  opts.signal?.throwIfAborted();
  const retention = await applyRetention(deps, at);
  return { clusters: list.length, machines: machineCount, reached, states, durationMs: Math.round(performance.now() - started), retention };
}
