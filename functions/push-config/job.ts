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

/** Pushes many metal machines of one cluster in one run, concurrently (runner/jobs/push-config/cluster.ts). */
export const pushClusterJob = defineJob(
  'push-cluster',
  z.strictObject({
    machines: z.array(z.strictObject({ id: z.string(), insecure: z.boolean(), certFingerprint: z.string().optional() })).min(1),
    /** How many machines are pushed at the same time. */
    concurrency: z.number().int().min(1),
    /** Bootstrap etcd on this control plane as soon as its push has succeeded. */
    bootstrap: z.string().optional(),
  }),
);
export type PushClusterParams = JobParams<typeof pushClusterJob>;
