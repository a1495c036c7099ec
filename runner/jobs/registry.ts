// The worker's map from run kind to executor. Each entry binds a job spec (functions/*/job.ts,
// what the routes enqueue) to its executor here, so the link is an import, not a string.
import type { z } from 'zod';
import { backupJob } from '../../functions/backup/job.ts';
import { collectJob, scheduledCollect } from '../../functions/collect/job.ts';
import type { Deps } from '../../functions/context.ts';
import { provisionJob } from '../../functions/provision/job.ts';
import { bootstrapJob, pushClusterJob, pushConfigJob } from '../../functions/push-config/job.ts';
import { pushClusterExecutor } from './push-config/cluster.ts';
import { etcdRestoreJob, etcdSnapshotJob } from '../../functions/etcd/job.ts';
import { etcdRestoreExecutor, etcdSnapshotExecutor, scheduledEtcdSnapshots } from './etcd/snapshot.ts';
import { pruneStateCredentials, revokeStateCredential } from '../../functions/state/credentials.ts';
import { upgradeJob } from '../../functions/upgrade/job.ts';
import { meshRepushJob } from '../../functions/mesh/job.ts';
import { meshRepushExecutor } from './mesh/repush.ts';
import { meshStunCron } from './mesh/stun.ts';
import { upgradeKubernetesJob } from '../../functions/upgrade/kubernetes-job.ts';
import { upgradeKubernetesExecutor } from './upgrade-kubernetes/executor.ts';
import { describeZodError } from '../../lib/http/validate.ts';
import { RunError, type Executor, type ExecutorRegistry, type JobExecutor } from '../../lib/jobs/executor.ts';
import type { JobSpec } from '../../lib/jobs/spec.ts';
import type { CronJob } from '../cron.ts';
import { backupExecutor } from './backup/executor.ts';
import { collectExecutor } from './collect/executor.ts';
import { provisionExecutor } from './provision/executor.ts';
import { bootstrapExecutor } from './push-config/bootstrap.ts';
import { pushConfigExecutor } from './push-config/executor.ts';
import { upgradeExecutor } from './upgrade/executor.ts';
import { leaseOwnerIsGone } from '../lease-owner.ts';
import { eq, inArray } from 'drizzle-orm';
import { runs, stateLocks } from '../../db/schema/index.ts';
import { TERMINAL_STATES, type RunState } from '../../lib/jobs/types.ts';

export type AppExecutors = ExecutorRegistry<Deps>;

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

/** Every run kind the worker can execute. */
export function executors(): AppExecutors {
  return Object.fromEntries([
    bind(backupJob, backupExecutor),
    bind(provisionJob, provisionExecutor),
    bind(collectJob, collectExecutor),
    bind(pushConfigJob, pushConfigExecutor),
    bind(bootstrapJob, bootstrapExecutor),
    bind(pushClusterJob, pushClusterExecutor),
    bind(etcdSnapshotJob, etcdSnapshotExecutor),
    bind(etcdRestoreJob, etcdRestoreExecutor),
    bind(upgradeJob, upgradeExecutor),
    bind(meshRepushJob, meshRepushExecutor),
    bind(upgradeKubernetesJob, upgradeKubernetesExecutor),
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
    if (leaseOwnerIsGone(run?.leaseOwner)) await revokeStateCredential(deps, id);
    else deps.log.warn('interrupted run keeps its state lock until its process ends', { run: id, worker: run?.leaseOwner ?? null });
  }
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
    { name: 'collect', pattern: deps.settings.collectCron, run: () => scheduledCollect(deps) },
    ...(deps.settings.etcdSnapshotCron ? [{ name: 'etcd-snapshot', pattern: deps.settings.etcdSnapshotCron, run: () => scheduledEtcdSnapshots(deps) }] : []),
    ...meshStunCron(deps),
  ];
}
