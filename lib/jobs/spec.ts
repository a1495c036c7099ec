import type { z } from 'zod';
import type { Alongside, Jobs } from './queue.ts';
import type { Run } from './types.ts';

/** Where a run of a kind is queued and what it excludes. */
export interface EnqueueTarget {
  tenantId?: string | null;
  clusterId?: string | null;
  /** At most one exclusive run per lock key is queued or running. */
  exclusive: boolean;
  /** Defaults to the cluster id. */
  lockKey?: string;
  createdBy?: string | null;
}

/**
 * A run kind as a typed contract between the route that queues it and the executor that runs it:
 * both import the spec, so a reader follows one to the other by imports alone, and the params
 * are validated on both sides of the queue.
 */
export interface JobSpec<K extends string = string, S extends z.ZodType<Record<string, unknown>> = z.ZodType<Record<string, unknown>>> {
  readonly kind: K;
  readonly params: S;
  /**
   * Validates the params and queues a run; a params bug fails here, in the request, not in the run.
   * `alongside`: rows that commit with the run or not at all (Jobs.enqueueWith).
   */
  enqueue(jobs: Pick<Jobs, 'enqueue' | 'enqueueWith'>, params: z.input<S>, target: EnqueueTarget, alongside?: Alongside): Promise<Run>;
}

export type JobParams<J> = J extends JobSpec<string, infer S> ? z.output<S> : never;

export function defineJob<const K extends string, S extends z.ZodType<Record<string, unknown>>>(kind: K, params: S): JobSpec<K, S> {
  return {
    kind,
    params,
    async enqueue(jobs, input, target, alongside) {
      const run = { kind, params: params.parse(input), ...target };
      return alongside ? jobs.enqueueWith(run, alongside) : jobs.enqueue(run);
    },
  };
}
