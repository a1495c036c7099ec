// etcd snapshots: streamed from the first control plane whose etcd member reports no errors,
// sealed, stored, and pruned to the newest `keep`. Restore uploads one to a control plane that
// has not started etcd yet and bootstraps it from it, as `talosctl bootstrap --recover-from` does.
import { dialOf, talosDialer, type TalosDialer } from '../../../functions/machine-config/access.ts';
import { createHash } from 'node:crypto';
import { and, desc, eq, inArray } from 'drizzle-orm';
import { clusters, etcdSnapshots, machines } from '../../../db/schema/index.ts';
import type { SnapshotTrigger } from '../../../db/schema/etcd.ts';
import type { ClusterRow } from '../../../functions/inventory/load.ts';
import { RunError, type JobExecutor, type RunContext } from '../../../lib/jobs/executor.ts';
import type { Deps } from '../../../functions/context.ts';
import { DEFAULT_SNAPSHOT_KEEP, etcdSnapshotJob, snapshotSealContext, type EtcdRestoreParams, type EtcdSnapshotParams } from '../../../functions/etcd/job.ts';
import { enqueueClusterRun } from '../../../functions/runs/enqueue.ts';
import { newId } from '../../../lib/ids.ts';
import { etcdSnapshotProblem } from '../../../lib/talos/etcd-snapshot.ts';
import { errorMessage } from '../../../lib/errors.ts';
import { clusterAccess, type ClusterAccess } from '../cluster-access.ts';
import { reachableControlPlanes } from './control-planes.ts';
import { pushTimings } from '../push-config/timings.ts';

/** Upstream's gRPC message limit bounds one chunk, not the snapshot; this bounds what a run holds in memory. */
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
      const chunks: Buffer[] = [];
      let size = 0;
      await client.etcdSnapshot((chunk) => {
        size += chunk.length;
        if (size > MAX_SNAPSHOT_BYTES) throw new RunError(`snapshot larger than ${MAX_SNAPSHOT_BYTES} bytes`);
        chunks.push(chunk);
      }, { deadlineMs: t.readyTimeoutMs, signal });
      if (size === 0) throw new RunError(`${m.name} streamed an empty snapshot`);
      const data = Buffer.concat(chunks);
      // Not stored: a snapshot that is not whole would only fail the restore that needs it.
      const broken = etcdSnapshotProblem(data);
      if (broken) {
        await emit({ level: 'warn', type: 'etcd.snapshot.broken', message: `the snapshot from ${m.name} is not whole: ${broken}`, data: { machine: m.id, name: m.name, sizeBytes: size } });
        problems.push(`${m.name}: snapshot not whole: ${broken}`);
        continue;
      }
      const id = newId('esnap');
      const sha256 = createHash('sha256').update(data).digest('hex');
      const now = deps.clock.now();
      await deps.db.insert(etcdSnapshots).values({
        id, clusterId: cluster.id, createdAt: now, machineName: m.name, sizeBytes: size, revision: status.raftIndex, sha256,
        trigger: opts.trigger, runId: env.runId, sealed: deps.sealer.seal(data, snapshotSealContext(cluster.id, id)),
      });
      const all = await deps.db.select({ id: etcdSnapshots.id }).from(etcdSnapshots).where(eq(etcdSnapshots.clusterId, cluster.id)).orderBy(desc(etcdSnapshots.createdAt), desc(etcdSnapshots.id));
      const pruned = all.slice(opts.keep).map((r) => r.id);
      if (pruned.length) await deps.db.delete(etcdSnapshots).where(inArray(etcdSnapshots.id, pruned));
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

export const etcdRestoreExecutor: JobExecutor<Deps, EtcdRestoreParams> = async ({ run, deps, emit, signal }, p) => {
  const t = pushTimings(deps);
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, run.clusterId!)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  const snap = await deps.db.select().from(etcdSnapshots).where(and(eq(etcdSnapshots.id, p.snapshot), eq(etcdSnapshots.clusterId, cluster.id))).get();
  if (!snap) throw new RunError('snapshot no longer exists');
  const m = await deps.db.select().from(machines).where(and(eq(machines.id, p.machine), eq(machines.clusterId, cluster.id))).get();
  const address = m && (await dialOf(deps, m));
  if (!m || m.role !== 'controlplane' || !address) throw new RunError('the target is not a control plane with an address');
  const data = deps.sealer.open(snap.sealed, snapshotSealContext(cluster.id, snap.id));
  const access = await clusterAccess(deps, cluster);
  const client = await access.talosClient(address);
  try {
    await emit({ type: 'etcd.restore.upload', message: `uploading snapshot ${snap.id} (${data.length} bytes) to ${m.name} with EtcdRecover`, data: { snapshot: snap.id, machine: m.id } });
    await client.etcdRecover(data, { deadlineMs: t.readyTimeoutMs, signal });
    await emit({ type: 'etcd.restore.bootstrap', message: `bootstrapping ${m.name} from the snapshot (Bootstrap recover_etcd)` });
    await client.bootstrap({ deadlineMs: t.callDeadlineMs, signal, recoverEtcd: true });
  } catch (err) {
    signal.throwIfAborted();
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
