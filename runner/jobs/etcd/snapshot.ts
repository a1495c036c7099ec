// etcd snapshots: streamed from the first control plane whose etcd member reports no errors,
// sealed and stored chunk by chunk as they stream, and pruned to the newest `keep`. Restore uploads one to a control plane that
// has not started etcd yet and bootstraps it from it, as `talosctl bootstrap --recover-from` does.
import { dialOf, talosDialer, type TalosDialer } from '../../../functions/machine-config/access.ts';
import { createHash } from 'node:crypto';
import { and, desc, eq, inArray, notInArray } from 'drizzle-orm';
import { clusters, etcdSnapshotChunks, etcdSnapshots, machines } from '../../../db/schema/index.ts';
import type { SnapshotTrigger } from '../../../db/schema/etcd.ts';
import type { ClusterRow } from '../../../functions/inventory/load.ts';
import { RunError, type JobExecutor, type RunContext } from '../../../lib/jobs/executor.ts';
import type { Deps } from '../../../functions/context.ts';
import { DEFAULT_SNAPSHOT_KEEP, etcdSnapshotJob, type EtcdRestoreParams, type EtcdSnapshotParams } from '../../../functions/etcd/job.ts';
import { SNAPSHOT_CHUNK_BYTES, snapshotChunkSealContext, snapshotPieces, SnapshotUnreadable } from '../../../functions/etcd/stored.ts';
import { enqueueClusterRun } from '../../../functions/runs/enqueue.ts';
import { newId } from '../../../lib/ids.ts';
import { EtcdSnapshotCheck } from '../../../lib/talos/etcd-snapshot.ts';
import { errorMessage } from '../../../lib/errors.ts';
import { clusterAccess, type ClusterAccess } from '../cluster-access.ts';
import { reachableControlPlanes } from './control-planes.ts';
import { pushTimings } from '../push-config/timings.ts';

/** etcd's default quota; the snapshot is stored in sealed chunks as it streams, so a run holds one chunk, not this. */
const MAX_SNAPSHOT_BYTES = 2 * 1024 ** 3;

export interface SnapshotTaken {
  id: string;
  machine: string;
  sizeBytes: number;
  revision: string;
  sha256: string;
  pruned: string[];
}

/** What taking a snapshot needs from the run that takes it. */
export interface SnapshotEnv {
  deps: Deps;
  runId: string;
  emit: RunContext<Deps>['emit'];
  signal: AbortSignal;
  access: ClusterAccess;
  dial: TalosDialer;
}

/**
 * Streams a snapshot from the first control plane (by name) whose etcd member reports no errors,
 * stores it sealed, and prunes the cluster's snapshots to the newest `keep`. Fails naming every
 * control plane it tried when none could give one.
 */
export async function takeEtcdSnapshot(env: SnapshotEnv, cluster: ClusterRow, opts: { trigger: SnapshotTrigger; keep: number }): Promise<SnapshotTaken> {
  const { deps, emit, signal, access, dial } = env;
  const t = pushTimings(deps);
  const cps = await reachableControlPlanes(deps, cluster.id, dial);
  // Chunks of an earlier snapshot of this cluster that never got its row (the runner died mid-stream).
  await deps.db.delete(etcdSnapshotChunks).where(and(eq(etcdSnapshotChunks.clusterId, cluster.id), notInArray(etcdSnapshotChunks.snapshotId, deps.db.select({ id: etcdSnapshots.id }).from(etcdSnapshots))));
  const problems: string[] = [];
  for (const m of cps) {
    const client = await access.talosClient(dial(m)!);
    try {
      const status = await client.etcdStatus({ deadlineMs: t.callDeadlineMs, signal });
      if (status.errors.length) {
        problems.push(`${m.name}: ${status.errors.join('; ')}`);
        continue;
      }
      await emit({ type: 'etcd.snapshot.start', message: `streaming a snapshot from ${m.name} (raft index ${status.raftIndex})`, data: { machine: m.id, name: m.name } });
      const id = newId('esnap');
      const stored = await storeSnapshotStream(deps, cluster.id, id, (onChunk) => client.etcdSnapshot(onChunk, { deadlineMs: t.readyTimeoutMs, signal }));
      const size = stored.sizeBytes;
      if (size === 0) throw new RunError(`${m.name} streamed an empty snapshot`);
      // Not listed (its chunks are gone): a snapshot that is not whole would only fail the restore that needs it.
      if (stored.problem) {
        await emit({ level: 'warn', type: 'etcd.snapshot.broken', message: `the snapshot from ${m.name} is not whole: ${stored.problem}`, data: { machine: m.id, name: m.name, sizeBytes: size } });
        problems.push(`${m.name}: snapshot not whole: ${stored.problem}`);
        continue;
      }
      const sha256 = stored.sha256;
      const now = deps.clock.now();
      try {
        await deps.db.insert(etcdSnapshots).values({
          id, clusterId: cluster.id, createdAt: now, machineName: m.name, sizeBytes: size, revision: status.raftIndex, sha256,
          trigger: opts.trigger, runId: env.runId, sealed: null, chunks: stored.chunks,
        });
      } catch (err) {
        await dropChunks(deps, id);
        throw err;
      }
      const all = await deps.db.select({ id: etcdSnapshots.id }).from(etcdSnapshots).where(eq(etcdSnapshots.clusterId, cluster.id)).orderBy(desc(etcdSnapshots.createdAt), desc(etcdSnapshots.id));
      const pruned = all.slice(opts.keep).map((r) => r.id);
      if (pruned.length) {
        await deps.db.delete(etcdSnapshots).where(inArray(etcdSnapshots.id, pruned));
        await deps.db.delete(etcdSnapshotChunks).where(inArray(etcdSnapshotChunks.snapshotId, pruned));
      }
      await emit({ type: 'etcd.snapshot.done', message: `snapshot ${id}: ${size} bytes from ${m.name}${pruned.length ? `; pruned ${pruned.length}` : ''}`, data: { id, sizeBytes: size, revision: status.raftIndex, sha256, pruned } });
      return { id, machine: m.name, sizeBytes: size, revision: status.raftIndex, sha256, pruned };
    } catch (err) {
      signal.throwIfAborted();
      if (err instanceof RunError) throw err;
      problems.push(`${m.name}: ${errorMessage(err)}`);
    } finally {
      client.close();
    }
  }
  throw new RunError(`no healthy control plane to snapshot from: ${problems.join('; ')}`);
}

/** What storing a streamed snapshot came to; `problem` set: not whole, and nothing of it is kept. */
export interface StoredStream {
  sizeBytes: number;
  chunks: number;
  sha256: string;
  problem?: string;
}

async function dropChunks(deps: Deps, id: string): Promise<void> {
  await deps.db.delete(etcdSnapshotChunks).where(eq(etcdSnapshotChunks.snapshotId, id));
}

/**
 * Stores a snapshot as `stream` delivers it: pieces are gathered into SNAPSHOT_CHUNK_BYTES
 * chunks, each sealed (bound to cluster, snapshot and position) and inserted before more is read,
 * while its wholeness and SHA-256 are checked as it goes; at most one chunk is held. The caller
 * writes the etcd_snapshots row. A stream that fails, or a snapshot that is not whole, leaves no
 * chunk behind.
 */
export async function storeSnapshotStream(
  deps: Deps,
  clusterId: string,
  id: string,
  stream: (onChunk: (piece: Buffer) => Promise<void> | void) => Promise<void>,
): Promise<StoredStream> {
  const check = new EtcdSnapshotCheck();
  const buf = Buffer.allocUnsafe(SNAPSHOT_CHUNK_BYTES);
  let filled = 0;
  let seq = 0;
  const flush = async (): Promise<void> => {
    if (!filled) return;
    const sealed = deps.sealer.seal(buf.subarray(0, filled), snapshotChunkSealContext(clusterId, id, seq));
    filled = 0;
    await deps.db.insert(etcdSnapshotChunks).values({ snapshotId: id, seq, clusterId, sealed });
    seq++;
  };
  try {
    await stream((piece) => {
      if (check.size + piece.length > MAX_SNAPSHOT_BYTES) throw new RunError(`snapshot larger than ${MAX_SNAPSHOT_BYTES} bytes`);
      check.update(piece);
      if (filled + piece.length < buf.length) {
        piece.copy(buf, filled);
        filled += piece.length;
        return undefined;
      }
      return take(piece);
    });
    await flush();
    const problem = check.problem();
    if (problem) {
      await dropChunks(deps, id);
      return { sizeBytes: check.size, chunks: 0, sha256: '', problem };
    }
    return { sizeBytes: check.size, chunks: seq, sha256: check.sha256() };
  } catch (err) {
    await dropChunks(deps, id);
    throw err;
  }

  /** A piece that fills the chunk: flush each time it is full, then keep the rest. */
  async function take(piece: Buffer): Promise<void> {
    let at = 0;
    while (at < piece.length) {
      const n = piece.copy(buf, filled, at);
      filled += n;
      at += n;
      if (filled === buf.length) await flush();
    }
  }
}

/**
 * The snapshot an upgrade takes right before it touches the first node: a release that breaks
 * etcd, or a Kubernetes upgrade that rewrote what it stores, can be rolled back from it. Not
 * taken when the run was told so, or before the cluster has etcd. A snapshot that cannot be
 * taken stops the run with nothing touched.
 */
export async function snapshotBeforeUpgrade(env: SnapshotEnv, cluster: ClusterRow, wanted: boolean): Promise<SnapshotTaken | undefined> {
  if (!wanted) {
    await env.emit({ level: 'warn', type: 'etcd.snapshot.skip', message: 'no etcd snapshot before the upgrade: etcdSnapshot is false' });
    return undefined;
  }
  if (cluster.bootstrappedAt === null) {
    await env.emit({ type: 'etcd.snapshot.skip', message: 'no etcd snapshot before the upgrade: the cluster is not bootstrapped, so it has no etcd yet' });
    return undefined;
  }
  try {
    return await takeEtcdSnapshot(env, cluster, { trigger: 'upgrade', keep: env.deps.settings.etcdSnapshotKeep ?? DEFAULT_SNAPSHOT_KEEP });
  } catch (err) {
    env.signal.throwIfAborted();
    throw new RunError(`refusing to upgrade without an etcd snapshot: ${errorMessage(err)}; nothing was touched (etcdSnapshot: false upgrades without one)`);
  }
}

export const etcdSnapshotExecutor: JobExecutor<Deps, EtcdSnapshotParams> = async ({ run, deps, emit, signal }, p) => {
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, run.clusterId!)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  const env: SnapshotEnv = { deps, runId: run.id, emit, signal, access: await clusterAccess(deps, cluster), dial: await talosDialer(deps, cluster.id) };
  return takeEtcdSnapshot(env, cluster, { trigger: p.trigger, keep: p.keep });
};

/** A stored snapshot's pieces, then a check that they hash to the SHA-256 recorded when it was taken. */
async function* checkedPieces(deps: Deps, snap: typeof etcdSnapshots.$inferSelect): AsyncGenerator<Uint8Array> {
  const hash = createHash('sha256');
  for await (const piece of snapshotPieces(deps, snap)) {
    hash.update(piece);
    yield piece;
  }
  const got = hash.digest('hex');
  if (got !== snap.sha256) throw new SnapshotUnreadable(`snapshot ${snap.id}: its stored bytes hash to ${got}, not the recorded ${snap.sha256}`);
}

export const etcdRestoreExecutor: JobExecutor<Deps, EtcdRestoreParams> = async ({ run, deps, emit, signal }, p) => {
  const t = pushTimings(deps);
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, run.clusterId!)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  const snap = await deps.db.select().from(etcdSnapshots).where(and(eq(etcdSnapshots.id, p.snapshot), eq(etcdSnapshots.clusterId, cluster.id))).get();
  if (!snap) throw new RunError('snapshot no longer exists');
  const m = await deps.db.select().from(machines).where(and(eq(machines.id, p.machine), eq(machines.clusterId, cluster.id))).get();
  const address = m && (await dialOf(deps, m));
  if (!m || m.role !== 'controlplane' || !address) throw new RunError('the target is not a control plane with an address');
  const access = await clusterAccess(deps, cluster);
  const client = await access.talosClient(address);
  try {
    await emit({ type: 'etcd.restore.upload', message: `uploading snapshot ${snap.id} (${snap.sizeBytes} bytes) to ${m.name} with EtcdRecover`, data: { snapshot: snap.id, machine: m.id } });
    // Read, opened and uploaded one chunk at a time; a chunk that does not open, or bytes that do
    // not hash to what was stored, end the upload before Bootstrap is asked for.
    await client.etcdRecover(checkedPieces(deps, snap), { deadlineMs: t.readyTimeoutMs, signal });
    await emit({ type: 'etcd.restore.bootstrap', message: `bootstrapping ${m.name} from the snapshot (Bootstrap recover_etcd)` });
    await client.bootstrap({ deadlineMs: t.callDeadlineMs, signal, recoverEtcd: true });
  } catch (err) {
    signal.throwIfAborted();
    if (err instanceof SnapshotUnreadable) throw new RunError(`restore on ${m.name}: ${err.message}; nothing was bootstrapped`);
    throw new RunError(`restore on ${m.name}: ${errorMessage(err)}`);
  } finally {
    client.close();
  }
  const now = deps.clock.now();
  await deps.db.update(clusters).set({ bootstrappedAt: now, updatedAt: now }).where(eq(clusters.id, cluster.id));
  await emit({ type: 'etcd.restore.done', message: `etcd on ${m.name} restored from ${snap.id}; the other control planes join it as they boot` });
  return { snapshot: snap.id, machine: m.name, bootstrappedAt: now };
};

/** The cron's tick: one snapshot run per bootstrapped cluster; a cluster busy with another run is skipped this time. */
export async function scheduledEtcdSnapshots(deps: Deps): Promise<number> {
  const rows = await deps.db.select().from(clusters);
  let queued = 0;
  for (const cluster of rows.filter((r) => r.bootstrappedAt !== null)) {
    try {
      await enqueueClusterRun(deps, cluster, etcdSnapshotJob, { trigger: 'schedule', keep: deps.settings.etcdSnapshotKeep ?? DEFAULT_SNAPSHOT_KEEP }, 'cron');
      queued++;
    } catch (err) {
      deps.log.warn('scheduled etcd snapshot not queued', { cluster: cluster.id, error: errorMessage(err) });
    }
  }
  return queued;
}
