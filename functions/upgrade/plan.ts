// Pure decisions of an upgrade run: which image, which API, which nodes in which order.
import { installerImage } from '../../lib/talos/installer.ts';
import { compareVersions, parseVersion } from '../../lib/talos/versions.ts';
import { kubernetesRangeOf, kubernetesUnsupportedReason } from '../../lib/talos/k8s-compat.ts';
import { talosInstallProblem, type TalosInstallProblem } from '../../lib/talos/talos-compat.ts';
import type { ClusterTalosSettings } from '../machine-config/settings.ts';
import type { UpgradeParams } from './job.ts';

/** Everything before the tag (and digest) of an image reference: `registry/name[:tag][@sha256:…]` → `registry/name`. */
function repositoryOf(image: string): string {
  const noDigest = image.split('@')[0]!;
  const slash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  return colon > slash ? noDigest.slice(0, colon) : noDigest;
}

/**
 * The installer for `version`: the cluster's own installer image re-tagged (a pinned digest names
 * the old version, so it is dropped), else the Image Factory image of its schematic.
 */
export function defaultUpgradeImage(settings: Pick<ClusterTalosSettings, 'schematic' | 'installerImage'>, version: string, platform?: string): string {
  if (settings.installerImage) return `${repositoryOf(settings.installerImage)}:${version}`;
  return installerImage(settings.schematic, version, platform ? { platform } : {});
}

/** The image one machine upgrades to. */
export function upgradeImageOf(params: Pick<UpgradeParams, 'image' | 'images'>, machineId: string): string {
  return params.images?.[machineId] ?? params.image;
}

/**
 * Why the nodes could not run the cluster's Kubernetes after an upgrade to Talos `talosVersion`
 * (undefined: they can, or the release line is one the table does not know yet). A running Talos
 * validates the Kubernetes image tags of its config against its own support range, so such a
 * node would reject its config after the reboot. Every version in use counts: the cluster's, and
 * what machines already run after a Kubernetes upgrade that stopped part-way.
 */
export function kubernetesRefusal(talosVersion: string, cluster: { kubernetesVersion: string }, machines: ReadonlyArray<{ kubernetesComponents: Record<string, string> | null }>): string | undefined {
  if (!kubernetesRangeOf(talosVersion)) return undefined;
  const inUse = new Set([cluster.kubernetesVersion, ...machines.flatMap((m) => Object.values(m.kubernetesComponents ?? {}))]);
  const reasons = [...inUse].sort(compareVersions).map((v) => kubernetesUnsupportedReason(talosVersion, v)).filter((r): r is string => r !== undefined);
  if (reasons.length === 0) return undefined;
  return `${reasons.join('; ')}: after the reboot its nodes would reject their own configs (Talos checks the Kubernetes image tags it runs)`;
}

export type UpgradeApi = 'lifecycle' | 'legacy';

/**
 * LifecycleService/Upgrade exists from v1.13 (talosctl switches after v1.13.0-alpha.2);
 * MachineService/Upgrade is deprecated there and the only way on older nodes.
 */
export function apiFor(nodeVersion: string): UpgradeApi {
  const v = parseVersion(nodeVersion);
  if (!v) return 'legacy';
  return v.major > 1 || (v.major === 1 && v.minor >= 13) ? 'lifecycle' : 'legacy';
}

export function sameVersion(a: string, b: string): boolean {
  return parseVersion(a) !== undefined && parseVersion(b) !== undefined && compareVersions(a, b) === 0;
}

/** A minor-version downgrade is refused: Talos does not promise it works. */
export function isMinorDowngrade(from: string, to: string): boolean {
  const a = parseVersion(from);
  const b = parseVersion(to);
  if (!a || !b) return false;
  return b.major < a.major || (b.major === a.major && b.minor < a.minor);
}

/**
 * Why `talosVersion` is a minor-version downgrade for this cluster (undefined: it is not). Machines
 * count as well as the cluster: while an upgrade is half done the cluster keeps its old version and
 * only the machines already upgraded show the newer one.
 */
export function downgradeRefusal(talosVersion: string, cluster: { talosVersion: string }, machines: ReadonlyArray<{ name: string; talosVersion: string | null }>): string | undefined {
  if (isMinorDowngrade(cluster.talosVersion, talosVersion)) return `${talosVersion} is a minor-version downgrade from ${cluster.talosVersion}`;
  const ahead = machines.filter((m) => m.talosVersion !== null && isMinorDowngrade(m.talosVersion, talosVersion));
  if (ahead.length === 0) return undefined;
  return `${talosVersion} is a minor-version downgrade for machines already upgraded: ${ahead.map((m) => `${m.name} runs ${m.talosVersion}`).join(', ')}`;
}

export interface InstallerRefusal {
  message: string;
  machines: Array<{ name: string; talosVersion: string; code: TalosInstallProblem['code'] }>;
}

/**
 * The machines whose Talos the installer of `talosVersion` would refuse to install over (undefined:
 * none). Each node's installer checks this itself, but only once the node is drained, and neither
 * API nor `force` skips it (lib/talos/talos-compat.ts); a machine with no recorded version counts as
 * running the cluster's.
 */
export function installerRefusal(talosVersion: string, cluster: { talosVersion: string }, machines: ReadonlyArray<{ name: string; talosVersion: string | null }>): InstallerRefusal | undefined {
  const refused = [...machines]
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((m) => {
      const from = m.talosVersion ?? cluster.talosVersion;
      const problem = talosInstallProblem(from, talosVersion);
      return problem ? [{ name: m.name, talosVersion: from, problem }] : [];
    });
  if (refused.length === 0) return undefined;
  // One clause per version: a fleet of many machines on one old version reads as one sentence.
  const byVersion = new Map<string, { names: string[]; message: string }>();
  for (const r of refused) {
    const group = byVersion.get(r.talosVersion) ?? { names: [], message: r.problem.message };
    group.names.push(r.name);
    byVersion.set(r.talosVersion, group);
  }
  const clauses = [...byVersion.values()].map((g) => `${g.names.join(', ')}: ${g.message}`);
  return {
    message: `${clauses.join('; ')}. The node's installer checks this before it installs, after the drain, and refuses; force does not skip that check`,
    machines: refused.map((r) => ({ name: r.name, talosVersion: r.talosVersion, code: r.problem.code })),
  };
}

export interface PlannedMachine {
  id: string;
  name: string;
  role: 'controlplane' | 'worker';
}

export interface Batch<M extends PlannedMachine> {
  role: M['role'];
  machines: M[];
}

/**
 * Control planes one at a time, then workers `batchSize` at a time; by name within each role,
 * except that the control plane named `lastControlPlane` (the etcd leader) goes after the others,
 * so a rollout costs one leader election instead of one per control plane.
 */
export function upgradeBatches<M extends PlannedMachine>(machines: M[], batchSize: number, lastControlPlane?: string): Batch<M>[] {
  const byName = (a: M, b: M): number => a.name.localeCompare(b.name);
  const leaderLast = (a: M, b: M): number => Number(a.name === lastControlPlane) - Number(b.name === lastControlPlane) || byName(a, b);
  const cps = machines.filter((m) => m.role === 'controlplane').sort(leaderLast);
  const workers = machines.filter((m) => m.role === 'worker').sort(byName);
  const batches: Batch<M>[] = cps.map((m) => ({ role: 'controlplane', machines: [m] }));
  const size = Math.max(1, Math.floor(batchSize));
  for (let i = 0; i < workers.length; i += size) batches.push({ role: 'worker', machines: workers.slice(i, i + size) });
  return batches;
}
