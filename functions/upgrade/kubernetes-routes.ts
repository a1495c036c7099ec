import { eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { machines } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { ApiError, conflict } from '../../lib/http/errors.ts';
import { readJson } from '../../lib/http/validate.ts';
import { kubernetesPathProblem, kubernetesUnsupportedReason } from '../../lib/talos/k8s-compat.ts';
import { removedByUpgrade, removedRefusal, removedUsesByMachine, removesNothing } from '../../lib/talos/k8s-removed.ts';
import { kubernetesVersionSchema } from '../../lib/talos/validate.ts';
import type { AppEnv } from '../context.ts';
import { loadCluster } from '../inventory/load.ts';
import { machinesWithoutAddress } from '../machine-config/access.ts';
import { renderDocuments } from '../machine-config/render.ts';
import { openClusterSecrets } from '../machine-config/secrets.ts';
import { accepted, enqueueClusterRun } from '../runs/enqueue.ts';
import { chosenPolicy, inventoryPolicy } from '../manifests/job.ts';
import { upgradeKubernetesJob } from './kubernetes-job.ts';

export const upgradeKubernetesBody = z.strictObject({
  /** `1.37.0` or `v1.37.0`. */
  version: kubernetesVersionSchema,
  /** Default true: an etcd snapshot before the first step. */
  etcdSnapshot: z.boolean().optional(),
  /** Default false: go on (with a warning) when the cluster is not healthy before the first step. */
  force: z.boolean().optional(),
  /** Default false: go on when a node runs another config than RezusCloud renders for it (changes not pushed yet go with the upgrade). */
  includePendingConfig: z.boolean().optional(),
  /** Default true: end with the sync of Talos's bootstrap manifests (server-side apply, prune, wait for rollouts). */
  manifests: z.boolean().optional(),
  /** Default true: that sync deletes what an earlier one applied and no manifest names any more (talosctl --manifests-no-prune). */
  pruneManifests: z.boolean().optional(),
  /** Default false: that sync deletes and creates again objects whose immutable fields changed (talosctl --manifests-force). */
  recreateManifests: z.boolean().optional(),
  /** Default AdoptIfNoInventory: that sync's inventory policy (talosctl --manifests-inventory-policy). */
  manifestsInventoryPolicy: inventoryPolicy.optional(),
});

/**
 * `POST /v1/clusters/:id/upgrade-kubernetes {version}`: queues a Kubernetes upgrade (cluster-changing,
 * one at a time). Refused up front: a downgrade, a jump of more than one minor, a version the
 * Talos of the cluster or of any of its machines does not run, a config that sets a flag or
 * feature gate the target removed.
 */
export function upgradeKubernetesRoutes() {
  const app = new Hono<AppEnv>();
  app.post('/:id/upgrade-kubernetes', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = await readJson(c, upgradeKubernetesBody);
    const target = body.version;
    const path = kubernetesPathProblem(cluster.kubernetesVersion, target);
    if (path) throw new ApiError(409, path.code, path.message, { from: cluster.kubernetesVersion, to: target });
    const rows = await c.var.deps.db.select().from(machines).where(eq(machines.clusterId, cluster.id));
    if (rows.length === 0) throw conflict('the cluster has no machines to upgrade');
    if (!rows.some((m) => m.role === 'controlplane')) throw conflict('the cluster has no control plane');
    const noAddress = await machinesWithoutAddress(c.var.deps.db, cluster.id, rows);
    if (noAddress.length) throw conflict(`machines without a Talos API address: ${noAddress.join(', ')}`, { machines: noAddress });
    // Every Talos the cluster is known to run must support the target (the run re-checks what the nodes report).
    const talos = [...new Set([cluster.talosVersion, ...rows.map((m) => m.talosVersion).filter((v): v is string => !!v)])].sort();
    const unsupported = talos.map((v) => kubernetesUnsupportedReason(v, target)).filter((r): r is string => r !== undefined);
    if (unsupported.length) throw new ApiError(409, 'unsupported_by_talos', unsupported.join('; '), { talosVersions: talos, to: target });
    // Flags and feature gates the target no longer knows, in the configs the upgrade would push (the
    // run checks again, with the objects of removed APIs, which only the cluster can tell).
    const gone = removedByUpgrade(cluster.kubernetesVersion, target);
    if (gone && !removesNothing(gone)) {
      const secrets = openClusterSecrets(c.var.deps, cluster);
      const atTarget = { ...cluster, kubernetesVersion: target };
      const uses = removedUsesByMachine(rows.map((m) => ({ name: m.name, role: m.role, documents: renderDocuments(atTarget, { ...m, kubernetesComponents: null }, secrets) })), gone);
      if (uses.length) throw new ApiError(409, 'removed_in_target', `${removedRefusal(target, uses)}; take them out of the cluster's or machines' patches first`, { uses, to: target });
    }
    const policy = chosenPolicy(body.manifestsInventoryPolicy);
    const params = {
      fromVersion: cluster.kubernetesVersion,
      kubernetesVersion: target,
      ...(body.etcdSnapshot === false ? { etcdSnapshot: false } : {}),
      ...(body.force ? { force: true } : {}),
      ...(body.includePendingConfig ? { includePendingConfig: true } : {}),
      ...(body.manifests === false ? { manifests: false } : {}),
      ...(body.pruneManifests === false ? { pruneManifests: false } : {}),
      ...(body.recreateManifests ? { recreateManifests: true } : {}),
      ...(policy ? { manifestsInventoryPolicy: policy } : {}),
    };
    const run = await enqueueClusterRun(c.var.deps, cluster, upgradeKubernetesJob, params, c.var.principal.tokenId);
    return accepted(c, run);
  });
  return app;
}
