// A collect pass is a run of kind `collect`, exclusive under the lock key `collect`, so the
// database admits one queued-or-running pass across every runner sharing it. The cron and
// POST /v1/collect both enqueue; the worker executes (runner/jobs/collect).
import { z } from 'zod';
import { defineJob } from '../../lib/jobs/spec.ts';
import { ActiveRunConflict } from '../../lib/jobs/queue.ts';
import type { Run } from '../../lib/jobs/types.ts';
import type { Deps } from '../context.ts';

export const collectJob = defineJob(
  'collect',
  z.strictObject({ cluster: z.string().optional(), tenant: z.string().optional() }),
);
export const COLLECT_KIND = collectJob.kind;
export const COLLECT_LOCK = 'collect';

export interface CollectRequest {
  clusterId?: string;
  tenantId?: string;
  createdBy?: string | null;
}

/** Enqueues a pass; throws ActiveRunConflict while another pass is queued or running. */
export function enqueueCollect(deps: Pick<Deps, 'jobs'>, req: CollectRequest = {}): Promise<Run> {
  return collectJob.enqueue(
    deps.jobs,
    { ...(req.clusterId ? { cluster: req.clusterId } : {}), ...(req.tenantId ? { tenant: req.tenantId } : {}) },
    { exclusive: true, lockKey: COLLECT_LOCK, tenantId: req.tenantId ?? null, clusterId: req.clusterId ?? null, createdBy: req.createdBy ?? null },
  );
}

/** The cron tick: a pass unless one is already active (then this tick is skipped). */
export async function scheduledCollect(deps: Pick<Deps, 'jobs' | 'log'>): Promise<Run | undefined> {
  try {
    return await enqueueCollect(deps, { createdBy: 'cron' });
  } catch (err) {
    if (err instanceof ActiveRunConflict) {
      deps.log.debug('collect tick skipped: a pass is still active', { run: err.activeRunId });
      return undefined;
    }
    throw err;
  }
}
