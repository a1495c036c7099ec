import { index, integer, primaryKey, real, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { clusters, machines } from './core.ts';

// Health is kept apart from the machine lifecycle (machines.state: new → configured → …): a
// machine can be provisioned and unreachable at once, and the two are written by different code.

export const HEALTH_STATES = ['healthy', 'degraded', 'unreachable', 'unknown'] as const;
export type HealthStateValue = (typeof HEALTH_STATES)[number];

/**
 * Raw time series: one row per machine, metric and pass. The primary key doubles as the index
 * for "this machine's metric since t"; the ts index serves pruning.
 */
export const healthSamples = sqliteTable(
  'health_samples',
  {
    machineId: text('machine_id')
      .notNull()
      .references(() => machines.id, { onDelete: 'cascade' }),
    metric: text('metric').notNull(),
    ts: integer('ts').notNull(),
    value: real('value').notNull(),
  },
  (t) => [primaryKey({ columns: [t.machineId, t.metric, t.ts] }), index('health_samples_ts').on(t.ts)],
);

/** Raw samples folded into hours once they pass raw retention; `hour` is the hour's first ms. */
export const healthHourly = sqliteTable(
  'health_hourly',
  {
    machineId: text('machine_id')
      .notNull()
      .references(() => machines.id, { onDelete: 'cascade' }),
    metric: text('metric').notNull(),
    hour: integer('hour').notNull(),
    avg: real('avg').notNull(),
    min: real('min').notNull(),
    max: real('max').notNull(),
    count: integer('count').notNull(),
  },
  (t) => [primaryKey({ columns: [t.machineId, t.metric, t.hour] }), index('health_hourly_hour').on(t.hour)],
);

/** Each machine's state after the latest pass that reached it. */
export const machineHealth = sqliteTable(
  'machine_health',
  {
    machineId: text('machine_id')
      .primaryKey()
      .references(() => machines.id, { onDelete: 'cascade' }),
    clusterId: text('cluster_id')
      .notNull()
      .references(() => clusters.id, { onDelete: 'cascade' }),
    state: text('state', { enum: HEALTH_STATES }).notNull(),
    reasons: text('reasons', { mode: 'json' }).$type<string[]>().notNull(),
    checkedAt: integer('checked_at').notNull(),
    /** Last pass whose Talos calls answered; null if never. */
    lastSeenAt: integer('last_seen_at'),
    talosVersion: text('talos_version'),
    kubernetesVersion: text('kubernetes_version'),
    lastError: text('last_error'),
    /** Latest value per metric, for /metrics without scanning the series. */
    latest: text('latest', { mode: 'json' }).$type<Record<string, number>>().notNull(),
    /** systemStat.cpuTotal of the last pass, so the next one can derive cpu.utilization. */
    previousCpu: text('previous_cpu', { mode: 'json' }).$type<Record<string, number>>(),
  },
  (t) => [index('machine_health_cluster').on(t.clusterId)],
);

export interface EtcdRollup {
  expected: number;
  members: number | null;
  healthy: number;
  learners: number;
}

/** The cluster rollup of the latest pass. */
export const clusterHealth = sqliteTable('cluster_health', {
  clusterId: text('cluster_id')
    .primaryKey()
    .references(() => clusters.id, { onDelete: 'cascade' }),
  state: text('state', { enum: HEALTH_STATES }).notNull(),
  reasons: text('reasons', { mode: 'json' }).$type<string[]>().notNull(),
  checkedAt: integer('checked_at').notNull(),
  kubernetesVersion: text('kubernetes_version'),
  talosVersions: text('talos_versions', { mode: 'json' }).$type<string[]>().notNull(),
  etcd: text('etcd', { mode: 'json' }).$type<EtcdRollup>(),
  /** Error of the Kubernetes API side, if it failed. */
  kubeError: text('kube_error'),
});
