import type { Context } from 'hono';
import type { z } from 'zod';
import type { JobSpec } from '../../lib/jobs/spec.ts';
import type { Run } from '../../lib/jobs/types.ts';
import type { Alongside } from '../../lib/jobs/queue.ts';
import type { AppEnv, Deps } from '../context.ts';
import type { ClusterRow } from '../inventory/load.ts';
import { publicRun } from './routes.ts';

/** Queues a run that changes its cluster: the queue admits one such run per cluster at a time. */
export function enqueueClusterRun<S extends z.ZodType<Record<string, unknown>>>(
  deps: Pick<Deps, 'jobs'>,
  cluster: Pick<ClusterRow, 'id' | 'tenantId'>,
  job: JobSpec<string, S>,
  params: z.input<S>,
  createdBy: string,
  alongside?: Alongside,
): Promise<Run> {
  return job.enqueue(deps.jobs, params, { tenantId: cluster.tenantId, clusterId: cluster.id, exclusive: true, createdBy }, alongside);
}

/** `202 {run}`: the answer of every handler that queues work. */
export const accepted = (c: Context<AppEnv>, run: Run) => c.json({ run: publicRun(run) }, 202);
