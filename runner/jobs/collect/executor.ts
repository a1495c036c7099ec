import type { Deps } from '../../../functions/context.ts';
import type { JobParams } from '../../../lib/jobs/spec.ts';
import type { collectJob } from '../../../functions/collect/job.ts';
import type { JobExecutor } from '../../../lib/jobs/executor.ts';
import { runCollectPass } from './pass.ts';

export const collectExecutor: JobExecutor<Deps, JobParams<typeof collectJob>> = async ({ deps, signal, emit }, p) => {
  const summary = await runCollectPass(deps, {
    ...(p.cluster ? { clusterId: p.cluster } : {}),
    ...(p.tenant ? { tenantId: p.tenant } : {}),
    signal,
    emit,
  });
  await emit({
    type: 'collect.done',
    message: `collected ${summary.machines} machines in ${summary.clusters} clusters (${summary.reached} answered) in ${summary.durationMs} ms`,
    data: { ...summary },
  });
  return summary;
};
