import { z } from 'zod';
import { defineJob, type JobParams } from '../../lib/jobs/spec.ts';
import { inventoryPolicy } from '../manifests/job.ts';

/** A Kubernetes version upgrade the way `talosctl upgrade-k8s` does it (runner/jobs/upgrade-kubernetes). */
export const upgradeKubernetesJob = defineJob(
  'upgrade-kubernetes',
  z.strictObject({
    /** The cluster's `kubernetesVersion` when the run was queued: what components not yet upgraded run. */
    fromVersion: z.string(),
    /** Normalized, without `v`, e.g. `1.37.0`. */
    kubernetesVersion: z.string(),
    /** An etcd snapshot before the first step (runner/jobs/etcd). Absent: true. */
    etcdSnapshot: z.boolean().optional(),
    /** Upgrade even when the cluster fails the health check before the first step. Absent: false. */
    force: z.boolean().optional(),
    /**
     * Push configs that differ from what a node runs beyond the upgrade itself (a patch or setting
     * changed since its last push; an edit made on the node is lost). Absent: false, such a node
     * stops the run before the first step.
     */
    includePendingConfig: z.boolean().optional(),
    /** Sync the bootstrap manifests as the last step (runner/jobs/manifests). Absent: true. */
    manifests: z.boolean().optional(),
    /** That sync deletes what no manifest names any more. Absent: true. */
    pruneManifests: z.boolean().optional(),
    /** That sync deletes and creates again objects whose immutable fields changed. Absent: false. */
    recreateManifests: z.boolean().optional(),
    /** That sync's inventory policy. Absent: AdoptIfNoInventory. */
    manifestsInventoryPolicy: inventoryPolicy.optional(),
  }),
);
export type UpgradeKubernetesParams = JobParams<typeof upgradeKubernetesJob>;
