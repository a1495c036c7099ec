import type { Context } from 'hono';
import type { Run } from '../../lib/jobs/types.ts';
import type { AppEnv, Deps } from '../deps.ts';
import type { ClusterRow } from '../inventory/load.ts';
import { publicRun } from './routes.ts';

/** Queues a run that changes its cluster: the queue admits one such run per cluster at a time. */
export function enqueueClusterRun(
  deps: Pick<Deps, 'jobs'>,
  cluster: Pick<ClusterRow, 'id' | 'tenantId'>,
  kind: string,
  params: object,
  createdBy: string,
): Promise<Run> {
  return deps.jobs.enqueue({
    kind,
    tenantId: cluster.tenantId,
    clusterId: cluster.id,
    exclusive: true,
    params: params as Record<string, unknown>,
    createdBy,
  });
}

/** `202 {run}`: the answer of every handler that queues work. */
export const accepted = (c: Context<AppEnv>, run: Run) => c.json({ run: publicRun(run) }, 202);
