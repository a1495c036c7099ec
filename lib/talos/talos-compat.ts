// Which running Talos a Talos installer agrees to upgrade (or downgrade), and so which upgrades fail
// on the node after it has been drained. Facts from siderolabs/talos
// pkg/machinery/compatibility/talosNNN at v1.13.9 (talos114 at v1.14.0-rc.1):
// MinimumHostUpgradeVersion, and MaximumHostDowngradeVersion, which is exclusive. Upstream's
// TalosVersion.UpgradeableFrom compares only the version core, so pre-releases count as their
// release. Every installer since v1.3 runs that check as its pre-flight on every upgrade
// (cmd/installer/pkg/install/preflight.go) whatever its --force says, so no API or flag of ours
// gets past it. (Hosts before v1.3 do not hand the installer machined's socket, so it cannot ask
// them and lets them through; they are held to the same bounds here, which upstream declares.)
// DeniedHostUpgradeVersions is empty on every line, so it is not kept here.
import { parseVersion, type ParsedVersion } from './versions.ts';

/**
 * Installer's Talos `major.minor` → the lowest host minor it installs over and the first host minor
 * it refuses as too new (major 1). Every bound upstream sets is a `1.N.0`, so minors say it all.
 */
const HOSTS_BY_TALOS: Readonly<Record<string, readonly [number, number]>> = {
  '1.2': [0, 3],
  '1.3': [0, 5],
  '1.4': [0, 6],
  '1.5': [2, 7],
  '1.6': [3, 8],
  '1.7': [4, 9],
  '1.8': [5, 10],
  '1.9': [8, 11],
  '1.10': [8, 12],
  '1.11': [9, 13],
  '1.12': [10, 14],
  '1.13': [11, 15],
  '1.14': [12, 16],
};

const LINES = Object.keys(HOSTS_BY_TALOS).map((k) => Number(k.split('.')[1]));

function hostsOf(v: ParsedVersion): readonly [number, number] | undefined {
  return v.major === 1 ? HOSTS_BY_TALOS[`1.${v.minor}`] : undefined;
}

function placeIn(host: ParsedVersion, [lo, hi]: readonly [number, number]): 'too_old' | 'too_new' | undefined {
  if (host.major < 1 || (host.major === 1 && host.minor < lo)) return 'too_old';
  if (host.major > 1 || host.minor >= hi) return 'too_new';
  return undefined;
}

/** The Talos an installer of `talosVersion`'s line installs over, e.g. `{ min: 'v1.11.0', below: 'v1.15.0' }`; undefined for a line the table does not know. */
export function talosHostRange(talosVersion: string): { min: string; below: string } | undefined {
  const v = parseVersion(talosVersion);
  const range = v && hostsOf(v);
  return range ? { min: `v1.${range[0]}.0`, below: `v1.${range[1]}.0` } : undefined;
}

export interface TalosInstallProblem {
  code: 'host_too_old' | 'host_too_new';
  message: string;
}

/**
 * Why Talos `to` cannot be installed over a node running `from` (undefined: it can). Undefined too
 * for a target line the table does not know: its installer knows its own rules and we do not, so
 * it decides; and for a `from` that is not a version, which we cannot place.
 */
export function talosInstallProblem(from: string, to: string): TalosInstallProblem | undefined {
  const host = parseVersion(from);
  const target = parseVersion(to);
  const range = target && hostsOf(target);
  if (!host || !target || !range) return undefined;
  const place = placeIn(host, range);
  if (!place) return undefined;
  const line = `v1.${target.minor}`;
  // The nearest line this node can take that gets it closer: the newest older one for a node too
  // old, the oldest newer one for a node too new.
  const candidates = place === 'too_old' ? LINES.filter((l) => l < target.minor).reverse() : LINES.filter((l) => l > target.minor);
  const step = candidates.find((l) => !placeIn(host, HOSTS_BY_TALOS[`1.${l}`]!));
  if (place === 'too_old') {
    const way = step !== undefined ? `, so upgrade to v1.${step}.x first` : '';
    return { code: 'host_too_old', message: `${from} is too old to upgrade to Talos ${to} (Talos ${line} installs over v1.${range[0]}.0 or later)${way}` };
  }
  const way = step !== undefined ? `, so downgrade to v1.${step}.x first` : '';
  return { code: 'host_too_new', message: `${from} is too new to downgrade to Talos ${to} (Talos ${line} installs over versions before v1.${range[1]}.0)${way}` };
}
