// A bootstrap-manifest sync as a run of its own (POST /v1/clusters/:id/sync-manifests): after a
// Talos upgrade changed what the control planes render, or a config change of the CNI, CoreDNS or
// the inline manifests. A Kubernetes upgrade runs the same sync as its last step.
import { eq } from 'drizzle-orm';
import { clusters, machines } from '../../../db/schema/index.ts';
import type { Deps } from '../../../functions/context.ts';
import { DEFAULT_INVENTORY_POLICY, type InventoryPolicy, type SyncManifestsParams } from '../../../functions/manifests/job.ts';
import { talosDialer } from '../../../functions/machine-config/access.ts';
import type { UpgradeTimings } from '../../../functions/settings.ts';
import { abortedUnlessCanceled, RunError, type JobExecutor } from '../../../lib/jobs/executor.ts';
import { openKubeWriter } from '../../../lib/kube/drain.ts';
import { clusterAccess } from '../cluster-access.ts';
import { reachableControlPlanes } from '../etcd/control-planes.ts';
import { upgradeTimings } from '../upgrade/timings.ts';
import { syncManifests, type ManifestSyncContext, type ManifestSyncOptions, type ManifestSyncResult } from './sync.ts';

export function syncOptions(t: UpgradeTimings, p: { prune?: boolean; dryRun?: boolean; recreate?: boolean; inventoryPolicy?: InventoryPolicy }): ManifestSyncOptions {
  return {
    prune: p.prune !== false,
    dryRun: p.dryRun === true,
    recreate: p.recreate === true,
    inventoryPolicy: p.inventoryPolicy ?? DEFAULT_INVENTORY_POLICY,
    waitMs: t.manifestWaitMs,
    pollMs: t.pollMs,
    callDeadlineMs: t.callDeadlineMs,
  };
}

/** Runs the sync and reports its counts as the run's closing summary. */
export async function syncAndReport(ctx: ManifestSyncContext, options: ManifestSyncOptions): Promise<ManifestSyncResult> {
  const result = await syncManifests(ctx, options);
  const { created, configured, recreated, unchanged, deleted } = result.counts;
  await ctx.emit({
    type: 'manifests.done',
    message: `bootstrap manifests of ${result.source}${result.dryRun ? ' (dry run: nothing changed)' : ''}: ${created} created, ${configured} configured, ${recreated ? `${recreated} recreated, ` : ''}${unchanged} unchanged, ${deleted} deleted`,
    data: { source: result.source, dryRun: result.dryRun, ...result.counts },
  });
  return result;
}

export const syncManifestsExecutor: JobExecutor<Deps, SyncManifestsParams> = async ({ run, deps, emit, signal }, params) => {
  const timings = upgradeTimings(deps.settings);
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, run.clusterId!)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  if (cluster.bootstrappedAt === null) throw new RunError('the cluster has no Kubernetes yet: bootstrap it first');
  const rows = await deps.db.select().from(machines).where(eq(machines.clusterId, cluster.id));
  const dial = await talosDialer(deps, cluster.id);
  const controlPlanes = (await reachableControlPlanes(deps, cluster.id, dial)).map((m) => ({ name: m.name, address: dial(m)! }));
  const access = await clusterAccess(deps, { ...cluster, endpoint: dial.kubeEndpoint(cluster, rows) });
  const kube = await openKubeWriter(await access.kubeconfig(), timings.kubeDeadlineMs, { guard: access.dialGuard });
  try {
    return await syncAndReport({ access, kube, controlPlanes, hard: abortedUnlessCanceled(signal), signal, emit }, syncOptions(timings, params));
  } finally {
    kube.close();
  }
};
