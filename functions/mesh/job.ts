import { z } from 'zod';
import type { Deps } from '../context.ts';
import type { ClusterRow } from '../inventory/load.ts';
import { defineJob, type JobParams } from '../../lib/jobs/spec.ts';
import { ActiveRunConflict } from '../../lib/jobs/queue.ts';
import type { Run } from '../../lib/jobs/types.ts';
import { affectedMachines } from '../../lib/mesh/store.ts';

/**
 * Re-pushes the configs of mesh nodes whose delivered WireguardConfig dials an old hub endpoint
 * (runner/jobs/mesh/repush.ts). The nodes to push are read when the run starts, so a run queued
 * for one change also covers a later one.
 */
export const meshRepushJob = defineJob(
  'mesh-repush',
  z.strictObject({
    /** Why, in words, e.g. "hub endpoint changed from A to B"; it heads the run's events. */
    reason: z.string().min(1).max(500),
  }),
);
export type MeshRepushParams = JobParams<typeof meshRepushJob>;

export type RepushOutcome = { run: Run; machines: number } | { run: null; reason: string };

/**
 * Queues a re-push when some node dials a stale endpoint. Another run of the cluster being active
 * is not an error here: the change is recorded, the nodes stay listed as pending in GET …/mesh,
 * and POST …/mesh/repush (or the next endpoint change) queues it.
 */
export async function enqueueRepush(
  deps: Pick<Deps, 'db' | 'jobs'>,
  cluster: Pick<ClusterRow, 'id' | 'tenantId'>,
  reason: string,
  createdBy: string,
): Promise<RepushOutcome> {
  const affected = await affectedMachines(deps.db, cluster.id);
  if (affected.length === 0) return { run: null, reason: 'no node holds a config with another endpoint' };
  try {
    const run = await meshRepushJob.enqueue(deps.jobs, { reason }, { tenantId: cluster.tenantId, clusterId: cluster.id, exclusive: true, createdBy });
    return { run, machines: affected.length };
  } catch (err) {
    if (err instanceof ActiveRunConflict) return { run: null, reason: `run ${err.activeRunId} of the cluster is active; queue the re-push later with POST …/mesh/repush` };
    throw err;
  }
}
