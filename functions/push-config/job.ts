import { z } from 'zod';
import { defineJob, type JobParams } from '../../lib/jobs/spec.ts';

/** Pushes one machine's config over the Talos API (runner/jobs/push-config). */
export const pushConfigJob = defineJob(
  'push-config',
  z.strictObject({
    machine: z.string(),
    insecure: z.boolean(),
    certFingerprint: z.string().optional(),
    mode: z.enum(['auto', 'no-reboot', 'reboot', 'staged', 'try']),
    dryRun: z.boolean(),
  }),
);
export const PUSH_CONFIG_KIND = pushConfigJob.kind;
export type PushConfigParams = JobParams<typeof pushConfigJob>;

/** Bootstraps etcd on one configured control plane, once per cluster. */
export const bootstrapJob = defineJob('bootstrap', z.strictObject({ machine: z.string() }));
export const BOOTSTRAP_KIND = bootstrapJob.kind;
export type BootstrapParams = JobParams<typeof bootstrapJob>;
