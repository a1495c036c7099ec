import { z } from 'zod';
import { defineJob, type JobParams } from '../../lib/jobs/spec.ts';

/**
 * go-kubernetes' inventory policies (talosctl --manifests-inventory-policy): which existing objects
 * a sync may take over and prune. AdoptIfNoInventory (the default): its own and those no inventory
 * owns; MustMatch: its own only; AdoptAll: any, another inventory's too.
 */
export const INVENTORY_POLICIES = ['AdoptIfNoInventory', 'MustMatch', 'AdoptAll'] as const;
export type InventoryPolicy = (typeof INVENTORY_POLICIES)[number];
export const inventoryPolicy = z.enum(INVENTORY_POLICIES);
export const DEFAULT_INVENTORY_POLICY: InventoryPolicy = 'AdoptIfNoInventory';

/** A policy as a run's params keep it: absent when it is the default, as every default is. */
export const chosenPolicy = (policy: InventoryPolicy | undefined): InventoryPolicy | undefined => (policy === DEFAULT_INVENTORY_POLICY ? undefined : policy);

/** The bootstrap-manifest sync on its own (runner/jobs/manifests), as `talosctl upgrade-k8s` to the version a cluster already runs does it. */
export const syncManifestsJob = defineJob(
  'sync-manifests',
  z.strictObject({
    /** Delete objects an earlier sync applied that no manifest names any more. Absent: true. */
    prune: z.boolean().optional(),
    /** Report what would change; change nothing. Absent: false. */
    dryRun: z.boolean().optional(),
    /** Delete and create again an object whose immutable fields changed (talosctl --manifests-force). Absent: false. */
    recreate: z.boolean().optional(),
    /** Absent: AdoptIfNoInventory. */
    inventoryPolicy: inventoryPolicy.optional(),
  }),
);
export type SyncManifestsParams = JobParams<typeof syncManifestsJob>;
