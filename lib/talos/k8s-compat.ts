// Which Kubernetes versions a Talos release line runs, and which Kubernetes upgrades go in one step.
// Facts from siderolabs/talos pkg/machinery/compatibility/talosNNN (Minimum/MaximumKubernetesVersion;
// the maximum is written `1.N.99`, so every patch of that minor) and siderolabs/go-kubernetes
// upgrade.Path.IsSupported (same minor, or the next one).
import { compareVersions, parseVersion } from './versions.ts';

/** Talos `major.minor` → the lowest and highest Kubernetes minor it supports (major 1). */
const KUBERNETES_BY_TALOS: Readonly<Record<string, readonly [number, number]>> = {
  '1.2': [23, 25],
  '1.3': [24, 26],
  '1.4': [25, 27],
  '1.5': [26, 28],
  '1.6': [24, 29],
  '1.7': [25, 30],
  '1.8': [26, 31],
  '1.9': [27, 32],
  '1.10': [28, 33],
  '1.11': [29, 34],
  '1.12': [30, 35],
  '1.13': [31, 36],
  '1.14': [32, 37],
  '1.15': [33, 38],
};

function minorsOf(talosVersion: string): readonly [number, number] | undefined {
  const t = parseVersion(talosVersion);
  return t ? KUBERNETES_BY_TALOS[`${t.major}.${t.minor}`] : undefined;
}

/** The Kubernetes minors `talosVersion` runs, e.g. `{ min: '1.31', max: '1.36' }`; undefined for a line the table does not know. */
export function kubernetesRangeOf(talosVersion: string): { min: string; max: string } | undefined {
  const range = minorsOf(talosVersion);
  return range ? { min: `1.${range[0]}`, max: `1.${range[1]}` } : undefined;
}

/** Why Talos `talosVersion` cannot run Kubernetes `kubernetesVersion` (undefined: it can). */
export function kubernetesUnsupportedReason(talosVersion: string, kubernetesVersion: string): string | undefined {
  const k = parseVersion(kubernetesVersion);
  if (!k) return `${kubernetesVersion} is not a Kubernetes version`;
  const minors = minorsOf(talosVersion);
  if (!minors) return `Talos ${talosVersion} has no known Kubernetes support range`;
  const [lo, hi] = minors;
  const range = `1.${lo} to 1.${hi}`;
  // Like upstream, only the version core counts: 1.37.0-rc.0 is a 1.37.
  if (k.major < 1 || (k.major === 1 && k.minor < lo)) return `Kubernetes ${kubernetesVersion} is too old for Talos ${talosVersion} (it runs ${range})`;
  if (k.major > 1 || k.minor > hi) return `Kubernetes ${kubernetesVersion} is too new for Talos ${talosVersion} (it runs ${range})`;
  return undefined;
}

export type UpgradePathProblem = { code: 'same_version' | 'downgrade_refused' | 'unsupported_upgrade_path'; message: string };

/** Why Kubernetes cannot go from `from` to `to` in one upgrade (undefined: it can): forward only, at most one minor. */
export function kubernetesPathProblem(from: string, to: string): UpgradePathProblem | undefined {
  const a = parseVersion(from);
  const b = parseVersion(to);
  if (!a || !b) return { code: 'unsupported_upgrade_path', message: `cannot compare ${from} and ${to}` };
  const order = compareVersions(from, to);
  if (order === 0) return { code: 'same_version', message: `the cluster already runs Kubernetes ${from}` };
  if (order > 0) return { code: 'downgrade_refused', message: `${to} is older than the cluster's ${from}; Kubernetes is never downgraded` };
  if (a.major !== b.major || b.minor - a.minor > 1) {
    return { code: 'unsupported_upgrade_path', message: `unsupported upgrade path ${a.major}.${a.minor}->${b.major}.${b.minor}: upgrade one minor version at a time` };
  }
  return undefined;
}
