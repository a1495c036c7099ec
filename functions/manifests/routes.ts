import { eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { machines } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { ApiError, conflict } from '../../lib/http/errors.ts';
import { parseWith, readJson } from '../../lib/http/validate.ts';
import type { AppEnv } from '../context.ts';
import { loadCluster } from '../inventory/load.ts';
import { accepted, enqueueClusterRun } from '../runs/enqueue.ts';
import { chosenPolicy, inventoryPolicy, syncManifestsJob } from './job.ts';

export const syncManifestsBody = z.strictObject({
  /** Default true: delete what an earlier sync applied and no manifest names any more. */
  prune: z.boolean().optional(),
  /** Default false: only report what would be created, configured and deleted. */
  dryRun: z.boolean().optional(),
  /** Default false: delete and create again an object whose immutable fields changed (a workload's selector), as talosctl --manifests-force does. */
  recreate: z.boolean().optional(),
  /** Default AdoptIfNoInventory: which existing objects the sync may take over and prune (MustMatch: only its own; AdoptAll: another inventory's too). */
  inventoryPolicy: inventoryPolicy.optional(),
});

/**
 * `POST /v1/clusters/:id/sync-manifests {prune?, dryRun?, recreate?, inventoryPolicy?}`: applies the bootstrap manifests the
 * control planes render from their configs (after a Talos upgrade, or a change of the CNI, CoreDNS
 * or inline manifests), as a Kubernetes upgrade does at its end.
 */
export function manifestRoutes() {
  const app = new Hono<AppEnv>();
  app.post('/:id/sync-manifests', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = (await c.req.text()).length ? await readJson(c, syncManifestsBody) : parseWith(syncManifestsBody, {});
    if (cluster.bootstrappedAt === null) throw new ApiError(409, 'not_bootstrapped', 'the cluster has no Kubernetes yet: bootstrap it first');
    const rows = await c.var.deps.db.select({ role: machines.role }).from(machines).where(eq(machines.clusterId, cluster.id));
    if (!rows.some((m) => m.role === 'controlplane')) throw conflict('the cluster has no control plane');
    const policy = chosenPolicy(body.inventoryPolicy);
    const params = {
      ...(body.prune === false ? { prune: false } : {}),
      ...(body.dryRun ? { dryRun: true } : {}),
      ...(body.recreate ? { recreate: true } : {}),
      ...(policy ? { inventoryPolicy: policy } : {}),
    };
    const run = await enqueueClusterRun(c.var.deps, cluster, syncManifestsJob, params, c.var.principal.tokenId);
    return accepted(c, run);
  });
  return app;
}
