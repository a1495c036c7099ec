// The worker's map from run kind to executor. Each entry binds a job spec (functions/*/job.ts,
// what the routes enqueue) to its executor here, so the link is an import, not a string: a
// dynamic one, whose spec's kind the compiler checks against the entry's.
import { readdir, readlink, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { z } from 'zod';
import type { Deps } from '../../functions/context.ts';
import { pruneStateCredentials, revokeStateCredential } from '../../functions/state/credentials.ts';
import { meshStunCron } from './mesh/stun.ts';
import { describeZodError } from '../../lib/http/validate.ts';
import { errorMessage } from '../../lib/errors.ts';
import { RunError, type Executor, type ExecutorRegistry, type JobExecutor } from '../../lib/jobs/executor.ts';
import type { JobSpec } from '../../lib/jobs/spec.ts';
import type { CronJob } from '../cron.ts';
import { leaseOwnerIsGone } from '../lease-owner.ts';
import { eq, inArray } from 'drizzle-orm';
import { runs, stateLocks } from '../../db/schema/index.ts';
import { TERMINAL_STATES, type Run, type RunState } from '../../lib/jobs/types.ts';

export type AppExecutors = ExecutorRegistry<Deps>;

// Executors are imported on their first run, not at start: together they pull in gRPC and the
// Talos protos, the Kubernetes client, certificate code and tofu's driver, which a runner that
// only serves the API never needs. So are the specs (functions/*/job.ts): their params schemas
// need zod, which nothing else on the way to the first /readyz does. The worker's kinds are the
// entries' keys; the params check runs once the spec is loaded, before the executor sees a run.
const loaded = new Set<string>();

/** An executor whose module is imported on its first run; `name` records that it was. */
function lazy<P>(name: string, load: () => Promise<JobExecutor<Deps, P>>): JobExecutor<Deps, P> {
  let executor: Promise<JobExecutor<Deps, P>> | undefined;
  return async (ctx, params) => {
    executor ??= load().then((e) => (loaded.add(name), e));
    return (await executor)(ctx, params);
  };
}

/** Shutdown: releases what loaded executors keep between runs (the collect pass's pooled channels). */
export async function closeExecutors(deps: Deps): Promise<void> {
  if (loaded.has('collect')) (await import('./collect/access-cache.ts')).closeCollectAccessCache(deps);
}

/**
 * An executor that sees only params its spec accepts: a run queued with bad params (an older
 * runner's shape, a hand-edited row) fails before it does anything.
 */
export function bind<S extends z.ZodType<Record<string, unknown>>>(
  spec: JobSpec<string, S>,
  execute: JobExecutor<Deps, z.output<S>>,
): [string, Executor<Deps>] {
  return [
    spec.kind,
    (ctx) => {
      const parsed = spec.params.safeParse(ctx.run.params);
      if (!parsed.success) throw new RunError(`run params do not fit the ${spec.kind} job: ${describeZodError(parsed.error)}`);
      return execute(ctx, parsed.data);
    },
  ];
}

/**
 * Binds a kind to the spec and the executor that dynamic imports yield: the spec loads with the
 * first run of the kind, the executor with the first run whose params the spec accepts.
 * The kind is given here because the worker needs it at start; the compiler holds it to the
 * spec's own (JobSpec<K>), and a spec of another kind fails the run rather than run the wrong check.
 */
export function bindLazy<const K extends string, S extends z.ZodType<Record<string, unknown>>>(
  kind: K,
  loadSpec: () => Promise<JobSpec<NoInfer<K>, S>>,
  loadExecutor: () => Promise<JobExecutor<Deps, z.output<S>>>,
): [string, Executor<Deps>] {
  let bound: Promise<Executor<Deps>> | undefined;
  const load = () =>
    (bound ??= loadSpec().then(
      (spec) => {
        if (spec.kind !== kind) throw new RunError(`the ${kind} entry of the registry loaded the spec of ${spec.kind}`);
        return bind(spec, lazy(kind, loadExecutor))[1];
      },
      (err: unknown) => {
        // The next run of the kind tries the import again.
        bound = undefined;
        throw err;
      },
    ));
  return [kind, async (ctx) => (await load())(ctx)];
}

/** The spec of every kind the worker runs, each imported on demand (test/job-spec.test.ts loads them all). */
export const jobSpecs = {
  backup: async () => (await import('../../functions/backup/job.ts')).backupJob,
  provision: async () => (await import('../../functions/provision/job.ts')).provisionJob,
  collect: async () => (await import('../../functions/collect/job.ts')).collectJob,
  'push-config': async () => (await import('../../functions/push-config/job.ts')).pushConfigJob,
  bootstrap: async () => (await import('../../functions/push-config/job.ts')).bootstrapJob,
  'push-cluster': async () => (await import('../../functions/push-config/job.ts')).pushClusterJob,
  'etcd-snapshot': async () => (await import('../../functions/etcd/job.ts')).etcdSnapshotJob,
  'etcd-restore': async () => (await import('../../functions/etcd/job.ts')).etcdRestoreJob,
  'etcd-defrag': async () => (await import('../../functions/etcd/job.ts')).etcdDefragJob,
  upgrade: async () => (await import('../../functions/upgrade/job.ts')).upgradeJob,
  'upgrade-kubernetes': async () => (await import('../../functions/upgrade/kubernetes-job.ts')).upgradeKubernetesJob,
  'mesh-repush': async () => (await import('../../functions/mesh/job.ts')).meshRepushJob,
  'sync-manifests': async () => (await import('../../functions/manifests/job.ts')).syncManifestsJob,
} as const;

/** Every run kind the worker can execute. */
export function executors(): AppExecutors {
  const s = jobSpecs;
  return Object.fromEntries([
    bindLazy('backup', s.backup, async () => (await import('./backup/executor.ts')).backupExecutor),
    bindLazy('provision', s.provision, async () => (await import('./provision/executor.ts')).provisionExecutor),
    bindLazy('collect', s.collect, async () => (await import('./collect/executor.ts')).collectExecutor),
    bindLazy('push-config', s['push-config'], async () => (await import('./push-config/executor.ts')).pushConfigExecutor),
    bindLazy('bootstrap', s.bootstrap, async () => (await import('./push-config/bootstrap.ts')).bootstrapExecutor),
    bindLazy('push-cluster', s['push-cluster'], async () => (await import('./push-config/cluster.ts')).pushClusterExecutor),
    bindLazy('etcd-snapshot', s['etcd-snapshot'], async () => (await import('./etcd/snapshot.ts')).etcdSnapshotExecutor),
    bindLazy('etcd-restore', s['etcd-restore'], async () => (await import('./etcd/snapshot.ts')).etcdRestoreExecutor),
    bindLazy('etcd-defrag', s['etcd-defrag'], async () => (await import('./etcd/defrag.ts')).etcdDefragExecutor),
    bindLazy('upgrade', s.upgrade, async () => (await import('./upgrade/executor.ts')).upgradeExecutor),
    bindLazy('upgrade-kubernetes', s['upgrade-kubernetes'], async () => (await import('./upgrade-kubernetes/executor.ts')).upgradeKubernetesExecutor),
    bindLazy('mesh-repush', s['mesh-repush'], async () => (await import('./mesh/repush.ts')).meshRepushExecutor),
    bindLazy('sync-manifests', s['sync-manifests'], async () => (await import('./manifests/executor.ts')).syncManifestsExecutor),
  ]);
}

/**
 * Clean-up for runs whose lease expired. Only when the worker's process is known dead (a crash on
 * this host) are its state credential revoked and its tofu's state lock released. A worker that
 * may merely be paused keeps both: its tofu may still be applying, so the lock keeps every other
 * run off the state (they wait, then fail with 423 naming the holder) and a late write of its
 * state is stored, not refused. The worker releases both itself once its tofu exits; otherwise
 * they go when the credential expires (pruneStateCredentials) or an admin force-unlocks.
 */
export async function onRunsInterrupted(deps: Deps, runIds: string[]): Promise<void> {
  for (const id of runIds) {
    const run = await deps.jobs.get(id);
    if (run && leaseOwnerIsGone(run.leaseOwner)) {
      await revokeStateCredential(deps, id);
      // Its tofu may still be stopping (its guard gives it the grace): the files go once it is done.
      void clearRunFilesOnceFree(deps, run);
    } else deps.log.warn('interrupted run keeps its state lock until its process ends', { run: id, worker: run?.leaseOwner ?? null });
  }
}

type RunRef = Pick<Run, 'id' | 'tenantId' | 'clusterId'>;

/** The run's directory under the data dir; undefined for an id that cannot name one. */
async function runDirOf(deps: Deps, runId: string): Promise<string | undefined> {
  // Loaded only here: the reap path is the only one on a start that needs tofu's workspace code.
  const { runDirFor } = await import('../../lib/tofu/workspace.ts');
  try {
    return runDirFor(deps.settings.dataDir, runId);
  } catch {
    return undefined;
  }
}

/**
 * The run directory an ended run left (its machine configs, a vars file): at its reap, or at a
 * start for a run that ended while its directory could not go. What its tofu could not upload
 * (errored.tfstate) is stored first; if that fails the directory stays, for the next start to try.
 */
export async function clearRunFiles(deps: Deps, run: RunRef): Promise<void> {
  const dir = await runDirOf(deps, run.id);
  if (!dir) return;
  // A tofu whose runner died is stopped by its guard, which gives it the grace to finish and
  // write errored.tfstate there: its directory waits for it (the next start clears it).
  if (await inUse(dir)) {
    deps.log.warn('run directory still in use by a process; kept for the next start', { run: run.id });
    return;
  }
  try {
    if (run.tenantId && run.clusterId) {
      const { storeErroredState } = await import('./provision/errored-state.ts');
      await storeErroredState(deps, { workDir: join(dir, 'work'), runId: run.id, tenantId: run.tenantId, clusterId: run.clusterId });
    }
    await rm(dir, { recursive: true, force: true });
  } catch (err) {
    deps.log.error('files of an interrupted run not removed', { run: run.id, error: errorMessage(err) });
  }
}

/** How often, and how long past tofu's grace, a reaped run's directory is looked at until it is free. */
const FREE_LOOK_MS = 1_000;
const FREE_MARGIN_MS = 30_000;

/**
 * clearRunFiles once no process works in the run's directory any more, looked at every second for
 * at most tofu's grace and a margin (the guard SIGKILLs it by then); past that, a start clears it.
 */
async function clearRunFilesOnceFree(deps: Deps, run: RunRef): Promise<void> {
  const dir = await runDirOf(deps, run.id);
  if (!dir) return;
  const end = Date.now() + deps.settings.tofu.cancelGraceMs + FREE_MARGIN_MS;
  while ((await inUse(dir)) && Date.now() < end) await sleep(FREE_LOOK_MS, undefined, { ref: false });
  await clearRunFiles(deps, run);
}

/** Whether a process of this host works in `dir` (its cwd is there): Linux's /proc, else no. */
async function inUse(dir: string): Promise<boolean> {
  const pids = await readdir('/proc').catch(() => [] as string[]);
  for (const pid of pids) {
    if (!/^\d+$/.test(pid)) continue;
    const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => '');
    if (cwd === dir || cwd.startsWith(`${dir}/`)) return true;
  }
  return false;
}

/**
 * State locks still held by runs that ended: released (with the credential) once the process
 * that ran them is seen dead, e.g. a runner killed while it was paused after being reaped.
 */
export async function releaseLocksOfDeadRuns(deps: Deps): Promise<number> {
  const held = await deps.db
    .select({ runId: runs.id, owner: runs.leaseOwner })
    .from(stateLocks)
    .innerJoin(runs, eq(runs.id, stateLocks.heldBy))
    .where(inArray(runs.state, TERMINAL_STATES as RunState[]));
  let released = 0;
  for (const h of held) {
    if (!leaseOwnerIsGone(h.owner)) continue;
    await revokeStateCredential(deps, h.runId);
    released++;
  }
  return released;
}

/** Scheduled work; each entry is overrun-protected by the cron host. */
export function cronJobs(deps: Deps): CronJob[] {
  return [
    { name: 'state-credentials-prune', pattern: '17 * * * *', run: () => pruneStateCredentials(deps) },
    { name: 'state-locks-of-dead-runs', pattern: '* * * * *', run: () => releaseLocksOfDeadRuns(deps) },
    // Enqueues a pass unless one is active; the worker runs it, so every runner's cron may fire.
    { name: 'collect', pattern: deps.settings.collectCron, setting: 'REZUS_COLLECT_CRON', run: async () => (await import('../../functions/collect/job.ts')).scheduledCollect(deps) },
    ...(deps.settings.etcdSnapshotCron
      ? [{ name: 'etcd-snapshot', pattern: deps.settings.etcdSnapshotCron, setting: 'REZUS_ETCD_SNAPSHOT_CRON', run: async () => (await import('./etcd/snapshot.ts')).scheduledEtcdSnapshots(deps) }]
      : []),
    // Enqueues a backup unless one is active, like the collect pass.
    ...(deps.settings.backupCron
      ? [{ name: 'backup', pattern: deps.settings.backupCron, setting: 'REZUS_BACKUP_CRON', run: async () => (await import('../../functions/backup/job.ts')).scheduledBackup(deps) }]
      : []),
    ...meshStunCron(deps),
  ];
}
