// A Kubernetes upgrade the way `talosctl upgrade-k8s` does it, with RezusCloud rendering the
// configs itself: check the path, every node's Talos and what the target removes, pre-pull, then kube-apiserver,
// kube-controller-manager and kube-scheduler across the control planes, kube-proxy, and each
// node's kubelet, every step a no-reboot config apply followed by a wait until Kubernetes shows
// the component on the new version and ready. The first step that fails stops the run; a new run
// skips every step Kubernetes already shows done.
import { talosDialer } from '../../../functions/machine-config/access.ts';
import { eq } from 'drizzle-orm';
import { clusters, machines } from '../../../db/schema/index.ts';
import { DomainError, errorMessage } from '../../../lib/errors.ts';
import { abortedUnlessCanceled, RunError, type JobExecutor } from '../../../lib/jobs/executor.ts';
import { openKubeWriter } from '../../../lib/kube/drain.ts';
import { kubernetesPathProblem, kubernetesUnsupportedReason } from '../../../lib/talos/k8s-compat.ts';
import type { Deps } from '../../../functions/context.ts';
import type { ClusterRow, MachineRow } from '../../../functions/inventory/load.ts';
import { renderOrReject } from '../../../functions/machine-config/render.ts';
import { clusterMeshDeliveries, type MeshDelivery } from '../../../lib/mesh/dial.ts';
import type { ConfigDocument } from '../../../lib/talos/patch.ts';
import type { UpgradeKubernetesParams } from '../../../functions/upgrade/kubernetes-job.ts';
import { K8S_COMPONENTS } from '../../../lib/talos/k8s-images.ts';
import { clusterAccess, type ClusterAccess } from '../cluster-access.ts';
import { upgradeTimings } from '../upgrade/timings.ts';
import { clusterProblems, readHealth } from '../upgrade/health.ts';
import { prePull, pullsFor } from './prepull.ts';
import { checkRemoved } from './removed.ts';
import { checkPendingConfig } from './pending.ts';
import { snapshotBeforeUpgrade } from '../etcd/snapshot.ts';
import { readKubeState } from './kube.ts';
import { pendingReason, planSteps, runStep, stepLabel, type Step, type StepContext, type Target } from './steps.ts';
import { syncAndReport, syncOptions } from '../manifests/executor.ts';
import type { ManifestSyncResult } from '../manifests/sync.ts';

/** The last step's label: the sync of Talos's bootstrap manifests (runner/jobs/manifests). */
const MANIFESTS_STEP = 'bootstrap manifests';

export interface UpgradeKubernetesResult {
  from: string;
  kubernetesVersion: string;
  /** Step labels (`kube-apiserver on cp1`, `kube-proxy`, `kubelet on w1`), in order. */
  upgraded: string[];
  skipped: string[];
  /** Steps left for a later run when this one was canceled. */
  remaining: string[];
  clusterVersionUpdated: boolean;
  /** What the closing manifest sync did; null when it was skipped (`manifests: false`). */
  manifests: ManifestSyncResult['counts'] | null;
}


function render(cluster: ClusterRow, m: MachineRow, access: ClusterAccess, extraDocuments: ConfigDocument[]): string {
  try {
    return renderOrReject(cluster, m, access.secrets, 'patches', extraDocuments);
  } catch (err) {
    if (err instanceof DomainError) throw new RunError(`config for ${m.name}: ${err.message}`);
    throw err;
  }
}

/** Every node's own Talos must run the target (talosctl's VerifyVersionCompatibility). */
async function checkTalos(ctx: StepContext, targets: Target[]): Promise<void> {
  const problems = await Promise.all(
    targets.map(async (m) => {
      const client = await ctx.access.talosClient(m.address);
      try {
        const { tag } = await client.version({ deadlineMs: ctx.timings.callDeadlineMs, signal: ctx.hard });
        const why = kubernetesUnsupportedReason(tag, ctx.version);
        return why ? `${m.name}: ${why}` : undefined;
      } catch (err) {
        ctx.hard.throwIfAborted();
        return `${m.name}: cannot read its Talos version: ${errorMessage(err)}`;
      } finally {
        client.close();
      }
    }),
  );
  const found = problems.filter((p): p is string => p !== undefined);
  if (found.length) throw new RunError(`refusing to upgrade Kubernetes: ${found.join('; ')}`, { problems: found });
}

/**
 * The whole cluster healthy before the first step, as a Talos upgrade checks it before each of its
 * steps (etcd, every node's services, every Kubernetes node Ready, readyz): a rollout started on a
 * cluster that is already failing stops half-way at the first node it cannot bring back.
 * `talosctl upgrade-k8s` does not check; `force` goes on with a warning.
 */
async function checkHealth(ctx: StepContext, targets: Target[], force: boolean, now: number): Promise<void> {
  const problems = clusterProblems(await readHealth(ctx.access, targets, { timings: ctx.timings, signal: ctx.hard, now }));
  if (problems.length === 0) {
    await ctx.emit({ type: 'k8s.precheck', message: 'cluster healthy', data: { problems: [] } });
    return;
  }
  if (!force) throw new RunError(`refusing to upgrade Kubernetes: cluster not healthy: ${problems.join('; ')}`, { problems });
  await ctx.emit({ level: 'warn', type: 'k8s.precheck', message: `force: upgrading anyway; cluster not healthy: ${problems.join('; ')}`, data: { problems } });
}

export const upgradeKubernetesExecutor: JobExecutor<Deps, UpgradeKubernetesParams> = async ({ run, deps, emit, signal }, params) => {
  const timings = upgradeTimings(deps.settings);
  const version = params.kubernetesVersion;
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, run.clusterId!)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  const from = cluster.kubernetesVersion;
  const result: UpgradeKubernetesResult = { from, kubernetesVersion: version, upgraded: [], skipped: [], remaining: [], clusterVersionUpdated: false, manifests: null };
  const withManifests = params.manifests !== false;
  if (from === version) {
    await emit({ type: 'k8s.done', message: `the cluster already runs Kubernetes ${version}`, data: { upgraded: [], skipped: [] } });
    return result;
  }
  if (from !== params.fromVersion) throw new RunError(`the cluster's kubernetesVersion changed from ${params.fromVersion} to ${from} since the run was queued; start a new upgrade`);
  const path = kubernetesPathProblem(from, version);
  if (path) throw new RunError(path.message);

  const rows = await deps.db.select().from(machines).where(eq(machines.clusterId, cluster.id));
  const dial = await talosDialer(deps, cluster.id);
  const noAddress = rows.filter((m) => !dial(m)).map((m) => m.name).sort();
  if (noAddress.length) throw new RunError(`machines without a Talos API address: ${noAddress.join(', ')}`);
  const access = await clusterAccess(deps, { ...cluster, endpoint: dial.kubeEndpoint(cluster, rows) });
  // A mesh node's config must keep its WireguardConfig, or the apply would cut the link it came over.
  const mesh = await clusterMeshDeliveries(deps, cluster.id);
  const noMesh: MeshDelivery = { documents: [], endpoint: null };
  const byName = (a: MachineRow, b: MachineRow): number => a.name.localeCompare(b.name);
  const toTarget = (m: MachineRow): Target => {
    const delivery = mesh.get(m.id) ?? noMesh;
    return {
      id: m.id,
      name: m.name,
      role: m.role,
      address: dial(m)!,
      // What the node runs: the cluster's version, and what an earlier run already moved.
      oldConfig: render(cluster, m, access, delivery.documents),
      newConfig: render({ ...cluster, kubernetesVersion: version }, { ...m, kubernetesComponents: null }, access, delivery.documents),
      components: m.kubernetesComponents,
      meshEndpoint: delivery.endpoint,
    };
  };
  const controlPlanes = rows.filter((m) => m.role === 'controlplane').sort(byName).map(toTarget);
  const workers = rows.filter((m) => m.role === 'worker').sort(byName).map(toTarget);
  if (controlPlanes.length === 0) throw new RunError('the cluster has no control plane');
  const all = [...controlPlanes, ...workers];

  const hard = abortedUnlessCanceled(signal);
  // Loads the Kubernetes client before any deadline runs: loading stalls the event loop.
  const kube = await openKubeWriter(await access.kubeconfig(), timings.kubeDeadlineMs, { guard: access.dialGuard });
  const ctx: StepContext = { db: deps.db, access, kube, timings, version, hard, emit };
  try {
    await checkTalos(ctx, all);
    await checkRemoved(ctx, from, all);
    const steps = planSteps(controlPlanes, workers, K8S_COMPONENTS);
    const pending = new Set<Step>();
    for (const s of steps) {
      if ((await readKubeState(hard, () => pendingReason(ctx, s))) !== undefined) pending.add(s);
    }
    await emit({
      type: 'k8s.plan',
      message: `upgrading Kubernetes ${from} → ${version}: ${pending.size} of ${steps.length} steps to do`,
      data: { from, to: version, steps: steps.map((s) => ({ step: stepLabel(s), image: s.image, done: !pending.has(s) })), manifests: withManifests },
    });

    const stopped = async (index: number): Promise<UpgradeKubernetesResult> => {
      hard.throwIfAborted();
      result.remaining = [...steps.slice(index).filter((s) => pending.has(s)).map(stepLabel), ...(withManifests ? [MANIFESTS_STEP] : [])];
      await emit({ level: 'warn', type: 'k8s.stopped', message: `canceled; not done: ${result.remaining.join(', ') || 'none'}`, data: { remaining: result.remaining } });
      return result;
    };

    // Only the nodes a pending step pushes to: a node whose steps are done gets nothing.
    const pushedTo = new Set([...pending].flatMap((s) => (s.kind === 'kube-proxy' ? s.controlPlanes : [s.machine])));
    if (pushedTo.size) await checkPendingConfig(ctx, all.filter((t) => pushedTo.has(t)), params.includePendingConfig === true);
    if (pending.size) await checkHealth(ctx, all, params.force === true, deps.clock.now());
    await prePull(ctx, pullsFor([...pending], all));
    if (pending.size && !signal.aborted) await snapshotBeforeUpgrade({ deps, runId: run.id, emit, signal: hard, access, dial }, cluster, params.etcdSnapshot !== false);
    for (const [index, step] of steps.entries()) {
      if (signal.aborted) return await stopped(index);
      const label = stepLabel(step);
      const node = step.kind === 'kube-proxy' ? undefined : step.machine.name;
      if (!pending.has(step)) {
        result.skipped.push(label);
        await emit({ type: 'k8s.step.skip', message: `${label}: already on ${version}`, data: { step: label, component: step.component, node } });
        continue;
      }
      const started = performance.now();
      await emit({ type: 'k8s.step.start', message: `${label}: → ${step.image}`, data: { step: label, component: step.component, node, image: step.image } });
      await runStep(ctx, step);
      result.upgraded.push(label);
      const elapsedMs = Math.round(performance.now() - started);
      await emit({ type: 'k8s.step.done', message: `${label}: on ${version} and ready`, data: { step: label, component: step.component, node, elapsedMs } });
    }
    // Last, as talosctl: the manifests the control planes now render (kube-proxy's image among
    // them) applied, pruned and rolled out. A failure leaves the version unrecorded, so the next
    // run skips every step done and syncs again.
    if (withManifests) {
      if (signal.aborted) return await stopped(steps.length);
      const started = performance.now();
      await emit({ type: 'k8s.step.start', message: `${MANIFESTS_STEP}: sync with server-side apply`, data: { step: MANIFESTS_STEP } });
      // Like every step, a cancel lets it finish: `signal` is the hard one here too.
      const synced = await syncAndReport({ access, kube, controlPlanes, hard, signal: hard, emit }, syncOptions(timings, { prune: params.pruneManifests !== false, recreate: params.recreateManifests === true, ...(params.manifestsInventoryPolicy ? { inventoryPolicy: params.manifestsInventoryPolicy } : {}) }));
      result.manifests = synced.counts;
      result.upgraded.push(MANIFESTS_STEP);
      await emit({ type: 'k8s.step.done', message: `${MANIFESTS_STEP}: in sync`, data: { step: MANIFESTS_STEP, elapsedMs: Math.round(performance.now() - started) } });
    }
  } finally {
    kube.close();
  }

  // Only with every step done does the cluster record the version (and render it from now on); its
  // machines then carry nothing apart from it.
  await deps.db.batch([
    deps.db.update(clusters).set({ kubernetesVersion: version, updatedAt: deps.clock.now() }).where(eq(clusters.id, cluster.id)),
    deps.db.update(machines).set({ kubernetesComponents: null }).where(eq(machines.clusterId, cluster.id)),
  ]);
  result.clusterVersionUpdated = true;
  await emit({
    type: 'k8s.done',
    message: `Kubernetes ${version}: ${result.upgraded.length} steps done, ${result.skipped.length} already done`,
    data: { upgraded: result.upgraded, skipped: result.skipped },
  });
  return result;
};
