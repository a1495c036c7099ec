import { z } from 'zod';
import { defineJob, type JobParams } from '../../lib/jobs/spec.ts';

/** The bootstrap-manifest sync on its own (runner/jobs/manifests), as `talosctl upgrade-k8s` to the version a cluster already runs does it. */
export const syncManifestsJob = defineJob(
  'sync-manifests',
  z.strictObject({
    /** Delete objects an earlier sync applied that no manifest names any more. Absent: true. */
    prune: z.boolean().optional(),
    /** Report what would change; change nothing. Absent: false. */
    dryRun: z.boolean().optional(),
  }),
);
export type SyncManifestsParams = JobParams<typeof syncManifestsJob>;
