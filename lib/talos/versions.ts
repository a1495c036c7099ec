export const DEFAULT_TALOS_VERSION = 'v1.13.9';
export const DEFAULT_KUBERNETES_VERSION = '1.36.3';

export interface ParsedVersion {
  major: number;
  minor: number;
  patch: number;
  prerelease: string[];
}

// Semantic version core with an optional pre-release (`-rc.1`, `-beta.0`); build metadata
// (`+k3s1`, as some Kubernetes builds report) is accepted and, as semver says, ignored.
const SEMVER = /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;

export function parseVersion(input: string): ParsedVersion | undefined {
  const match = SEMVER.exec(input.trim());
  if (!match) return undefined;
  const prerelease = match[4] ? match[4].split('.') : [];
  if (prerelease.some((part) => /^0\d+$/.test(part))) return undefined;
  return { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3]), prerelease };
}

function format(v: ParsedVersion): string {
  const core = `${v.major}.${v.minor}.${v.patch}`;
  return v.prerelease.length > 0 ? `${core}-${v.prerelease.join('.')}` : core;
}

/** `1.13.9` or `v1.13.9` (pre-releases allowed) → `v1.13.9`; throws on anything else. */
export function normalizeTalosVersion(input: string): string {
  const parsed = parseVersion(input);
  if (!parsed) throw new Error('talosVersion: must look like v1.13.9 or v1.14.0-rc.1');
  return `v${format(parsed)}`;
}

/** `1.36.3` or `v1.36.3` → `1.36.3` (the form Talos' image tags get a `v` added to). */
export function normalizeKubernetesVersion(input: string): string {
  const parsed = parseVersion(input);
  if (!parsed) throw new Error('kubernetesVersion: must look like 1.36.3');
  return format(parsed);
}

function comparePrerelease(a: string[], b: string[]): number {
  if (a.length === 0 || b.length === 0) return b.length - a.length; // a release ranks above its pre-releases
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (x === y) continue;
    const xNum = /^\d+$/.test(x);
    const yNum = /^\d+$/.test(y);
    if (xNum && yNum) return Number(x) - Number(y);
    if (xNum !== yNum) return xNum ? -1 : 1;
    return x < y ? -1 : 1;
  }
  return 0;
}

/** Semantic-version order of two versions (with or without `v`): negative, 0 or positive. */
export function compareVersions(a: string, b: string): number {
  const x = parseVersion(a);
  const y = parseVersion(b);
  if (!x || !y) throw new Error(`cannot compare invalid version ${x ? b : a}`);
  const core = x.major - y.major || x.minor - y.minor || x.patch - y.patch;
  return Math.sign(core || comparePrerelease(x.prerelease, y.prerelease));
}

/** As compareVersions, but undefined when either side is not a version (what a node reports is not checked). */
export function compareReportedVersions(a: string, b: string): number | undefined {
  return parseVersion(a) && parseVersion(b) ? compareVersions(a, b) : undefined;
}

/** `v1.13.9` → `v1.13`: the release line, for contract decisions. */
export function talosMinor(version: string): string {
  const parsed = parseVersion(version);
  if (!parsed) throw new Error('talosVersion: invalid');
  return `v${parsed.major}.${parsed.minor}`;
}
