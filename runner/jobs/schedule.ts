// The runner's schedule, for the cron host (runner/cron.ts). Both load with the warm-up after the
// start (runner/host.ts), so neither the schedule's modules nor croner are on the way to /readyz.
import { scheduledCollect } from '../../functions/collect/job.ts';
import type { Deps } from '../../functions/context.ts';
import { pruneStateCredentials, revokeStateCredential } from '../../functions/state/credentials.ts';
import { eq, inArray } from 'drizzle-orm';
import { runs, stateLocks } from '../../db/schema/index.ts';
import { TERMINAL_STATES, type RunState } from '../../lib/jobs/types.ts';
import type { CronJob } from '../cron.ts';
import { leaseOwnerIsGone } from '../lease-owner.ts';
import { meshStunCron } from './mesh/stun.ts';

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
    ...(deps.settings.etcdSnapshotCron
      ? [{ name: 'etcd-snapshot', pattern: deps.settings.etcdSnapshotCron, run: async () => (await import('./etcd/snapshot.ts')).scheduledEtcdSnapshots(deps) }]
      : []),
    ...meshStunCron(deps),
  ];
}
