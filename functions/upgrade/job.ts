import { z } from 'zod';
import { defineJob, type JobParams } from '../../lib/jobs/spec.ts';

/** A rolling Talos upgrade, control planes first (runner/jobs/upgrade). */
export const upgradeJob = defineJob(
  'upgrade',
  z.strictObject({
    /** Normalized, e.g. `v1.13.9`. */
    talosVersion: z.string(),
    /** Installer image reference. */
    image: z.string(),
    /** Machine id → its own platform's installer; wins over `image` (absent when the caller named one image). */
    images: z.record(z.string(), z.string()).optional(),
    batchSize: z.number().int().min(1),
    /** Legacy API only: install now, activate on the next reboot (RezusCloud then reboots the node). */
    stage: z.boolean(),
    /** Upgrade even when the cluster fails the pre-upgrade health check. */
    force: z.boolean(),
    /** Legacy API only: keep the node's ephemeral data. */
    preserve: z.boolean(),
    /** Cordon and evict every pod before the reboot (v1.13+ API; machined drains on the legacy one). Absent: true. */
    drain: z.boolean().optional(),
    /** How long a drain may take before the run stops with the node cordoned. Absent: 5 minutes. */
    drainTimeoutMs: z.number().int().min(1).optional(),
    /** An etcd snapshot before the first node is touched (runner/jobs/etcd). Absent: true. */
    etcdSnapshot: z.boolean().optional(),
  }),
);
export const UPGRADE_KIND = upgradeJob.kind;
export type UpgradeParams = JobParams<typeof upgradeJob>;
