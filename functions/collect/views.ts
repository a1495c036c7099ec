// Read side of collect: what the health API returns and what the dashboard draws. No auth here:
// callers check that the principal may see the cluster first.
import { and, asc, eq, gte, sql } from 'drizzle-orm';
import { clusterHealth, healthHourly, healthSamples, machineHealth, machines, type EtcdRollup } from '../../db/schema/index.ts';
import type { Deps } from '../context.ts';
import { HOUR_MS, rawCutoff } from './window.ts';
import type { HealthState } from './types.ts';

export interface MachineHealthView {
  id: string;
  name: string;
  role: 'controlplane' | 'worker';
  state: HealthState;
  reasons: string[];
  /** When the latest pass looked at this machine (epoch ms); null if never. */
  checkedAt: number | null;
  /** When its Talos API last answered. */
  lastSeenAt: number | null;
  talosVersion: string | null;
  kubernetesVersion: string | null;
  lastError: string | null;
  /** Latest value per metric (e.g. memory.used_bytes, load.1, kube.ready). */
  latest: Record<string, number>;
}

export interface ClusterHealthView {
  cluster: string;
  state: HealthState;
  reasons: string[];
  checkedAt: number | null;
  kubernetesVersion: string | null;
  talosVersions: string[];
  etcd: EtcdRollup | null;
  kubeError: string | null;
  machines: MachineHealthView[];
}

type ViewDeps = Pick<Deps, 'db' | 'clock' | 'settings'>;

/** The rollup and every machine's latest state; a cluster never collected reads as unknown. */
export async function clusterHealthView(deps: ViewDeps, clusterId: string): Promise<ClusterHealthView> {
  const [rollup, rows] = await Promise.all([
    deps.db.select().from(clusterHealth).where(eq(clusterHealth.clusterId, clusterId)).get(),
    deps.db
      .select({ m: machines, h: machineHealth })
      .from(machines)
      .leftJoin(machineHealth, eq(machineHealth.machineId, machines.id))
      .where(eq(machines.clusterId, clusterId))
      .orderBy(asc(machines.name)),
  ]);
  return {
    cluster: clusterId,
    state: rollup?.state ?? 'unknown',
    reasons: rollup?.reasons ?? ['not collected yet'],
    checkedAt: rollup?.checkedAt ?? null,
    kubernetesVersion: rollup?.kubernetesVersion ?? null,
    talosVersions: rollup?.talosVersions ?? [],
    etcd: rollup?.etcd ?? null,
    kubeError: rollup?.kubeError ?? null,
    machines: rows.map(({ m, h }) => ({
      id: m.id,
      name: m.name,
      role: m.role,
      state: h?.state ?? 'unknown',
      reasons: h?.reasons ?? ['not collected yet'],
      checkedAt: h?.checkedAt ?? null,
      lastSeenAt: h?.lastSeenAt ?? null,
      talosVersion: h?.talosVersion ?? m.talosVersion,
      kubernetesVersion: h?.kubernetesVersion ?? null,
      lastError: h?.lastError ?? null,
      latest: h?.latest ?? {},
    })),
  };
}

export type Resolution = 'raw' | 'hour';
export interface RawPoint {
  metric: string;
  ts: number;
  value: number;
}
export interface HourPoint {
  metric: string;
  /** First ms of the hour. */
  ts: number;
  avg: number;
  min: number;
  max: number;
  count: number;
}

export const MAX_POINTS = 20_000;

/** Raw points at or after `since`, oldest first. */
async function rawPoints(deps: ViewDeps, machineId: string, since: number, metric?: string): Promise<RawPoint[]> {
  return deps.db
    .select({ metric: healthSamples.metric, ts: healthSamples.ts, value: healthSamples.value })
    .from(healthSamples)
    .where(and(eq(healthSamples.machineId, machineId), metric ? eq(healthSamples.metric, metric) : undefined, gte(healthSamples.ts, since)))
    .orderBy(asc(healthSamples.metric), asc(healthSamples.ts))
    .limit(MAX_POINTS);
}

/**
 * Hourly points from `since` (rounded down to its hour): the stored aggregates, merged with the
 * raw samples not folded yet, so the most recent hours are there too.
 */
async function hourPoints(deps: ViewDeps, machineId: string, since: number, metric?: string): Promise<HourPoint[]> {
  const fromHour = since - (since % HOUR_MS);
  const [stored, fresh] = await Promise.all([
    deps.db
      .select({ metric: healthHourly.metric, ts: healthHourly.hour, avg: healthHourly.avg, min: healthHourly.min, max: healthHourly.max, count: healthHourly.count })
      .from(healthHourly)
      .where(and(eq(healthHourly.machineId, machineId), metric ? eq(healthHourly.metric, metric) : undefined, gte(healthHourly.hour, fromHour)))
      .limit(MAX_POINTS),
    deps.db
      .select({
        metric: healthSamples.metric,
        ts: sql<number>`${healthSamples.ts} - (${healthSamples.ts} % ${HOUR_MS})`.as('h'),
        avg: sql<number>`avg(${healthSamples.value})`,
        min: sql<number>`min(${healthSamples.value})`,
        max: sql<number>`max(${healthSamples.value})`,
        count: sql<number>`count(*)`,
      })
      .from(healthSamples)
      .where(and(eq(healthSamples.machineId, machineId), metric ? eq(healthSamples.metric, metric) : undefined, gte(healthSamples.ts, fromHour)))
      .groupBy(healthSamples.metric, sql`h`)
      .limit(MAX_POINTS),
  ]);
  const merged = new Map<string, HourPoint>();
  for (const p of [...stored, ...fresh]) {
    const key = `${p.metric}\0${p.ts}`;
    const a = merged.get(key);
    const count = Number(p.count);
    if (!a) merged.set(key, { metric: p.metric, ts: Number(p.ts), avg: Number(p.avg), min: Number(p.min), max: Number(p.max), count });
    else {
      const n = a.count + count;
      merged.set(key, { ...a, avg: (a.avg * a.count + Number(p.avg) * count) / n, min: Math.min(a.min, Number(p.min)), max: Math.max(a.max, Number(p.max)), count: n });
    }
  }
  return [...merged.values()].sort((x, y) => x.metric.localeCompare(y.metric) || x.ts - y.ts).slice(0, MAX_POINTS);
}

/** Raw when `since` is inside raw retention, hourly when older (or when asked for). */
export async function machineSamples(
  deps: ViewDeps,
  machineId: string,
  q: { since: number; metric?: string; resolution?: Resolution },
): Promise<{ resolution: 'raw'; points: RawPoint[] } | { resolution: 'hour'; points: HourPoint[] }> {
  const resolution = q.resolution ?? (q.since < rawCutoff(deps, deps.clock.now()) ? 'hour' : 'raw');
  if (resolution === 'raw') return { resolution, points: await rawPoints(deps, machineId, q.since, q.metric) };
  return { resolution, points: await hourPoints(deps, machineId, q.since, q.metric) };
}

/**
 * One metric's values since `sinceMs`, oldest first, for a sparkline: hourly averages for the part
 * older than raw retention, then every raw sample.
 */
export async function machineSparkline(deps: ViewDeps, machineId: string, metric: string, sinceMs: number): Promise<number[]> {
  const cutoff = rawCutoff(deps, deps.clock.now());
  const raw = await rawPoints(deps, machineId, sinceMs, metric);
  if (sinceMs >= cutoff) return raw.map((p) => p.value);
  const fromHour = sinceMs - (sinceMs % HOUR_MS);
  const hours = await deps.db
    .select({ avg: healthHourly.avg })
    .from(healthHourly)
    .where(and(eq(healthHourly.machineId, machineId), eq(healthHourly.metric, metric), gte(healthHourly.hour, fromHour)))
    .orderBy(asc(healthHourly.hour))
    .limit(MAX_POINTS);
  return [...hours.map((h) => h.avg), ...raw.map((p) => p.value)];
}
