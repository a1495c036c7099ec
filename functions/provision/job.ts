import { z } from 'zod';
import { defineJob, type JobParams } from '../../lib/jobs/spec.ts';

/** A tofu plan, apply or destroy of one cluster's root module (runner/jobs/provision). */
export const provisionJob = defineJob(
  'provision',
  z.strictObject({
    mode: z.enum(['plan', 'apply']),
    destroy: z.boolean(),
    /** Set on the run that applies an approved plan: the plan run's id. */
    planRun: z.string().optional(),
  }),
);
export const PROVISION_KIND = provisionJob.kind;
export type ProvisionParams = JobParams<typeof provisionJob>;
