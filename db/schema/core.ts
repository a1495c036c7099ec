import { sql } from 'drizzle-orm';
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';

// Timestamps are epoch milliseconds: sortable, compact, and the same on libsql file and remote.
const createdAt = () => integer('created_at').notNull();

export const tenants = sqliteTable('tenants', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  createdAt: createdAt(),
});

export const tokens = sqliteTable(
  'tokens',
  {
    id: text('id').primaryKey(),
    // null tenant = an admin token.
    tenantId: text('tenant_id').references(() => tenants.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    hash: text('hash').notNull().unique(),
    scopes: text('scopes', { mode: 'json' }).$type<string[]>().notNull(),
    createdAt: createdAt(),
    lastUsedAt: integer('last_used_at'),
  },
  (t) => [index('tokens_tenant').on(t.tenantId)],
);

export const clusters = sqliteTable(
  'clusters',
  {
    id: text('id').primaryKey(),
    tenantId: text('tenant_id')
      .notNull()
      .references(() => tenants.id),
    name: text('name').notNull(),
    talosVersion: text('talos_version').notNull(),
    kubernetesVersion: text('kubernetes_version').notNull(),
    endpoint: text('endpoint').notNull(),
    // Everything Talos-specific (schematic, subnets, patches) lives in one JSON column so the
    // config generator owns its shape and the table does not churn with it.
    settings: text('settings', { mode: 'json' }).$type<Record<string, unknown>>().notNull(),
    secretsSealed: text('secrets_sealed'),
    bootstrappedAt: integer('bootstrapped_at'),
    createdAt: createdAt(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [uniqueIndex('clusters_tenant_name').on(t.tenantId, t.name)],
);

export const machines = sqliteTable(
  'machines',
  {
    id: text('id').primaryKey(),
    clusterId: text('cluster_id')
      .notNull()
      .references(() => clusters.id),
    name: text('name').notNull(),
    role: text('role', { enum: ['controlplane', 'worker'] }).notNull(),
    provider: text('provider', { enum: ['oci', 'openstack', 'hetzner', 'aws', 'metal', 'local'] }).notNull(),
    address: text('address'),
    installDisk: text('install_disk'),
    patches: text('patches', { mode: 'json' }).$type<unknown[]>().notNull(),
    // What RezusCloud last observed or did: new → configured (config delivered) etc.
    state: text('state').notNull(),
    talosVersion: text('talos_version'),
    ipv4: text('ipv4'),
    ipv6: text('ipv6'),
    // Components (`kube-apiserver` → `1.37.0`) this machine's config already carries at another
    // version than the cluster's kubernetesVersion: a Kubernetes upgrade writes it before each
    // step it applies and clears it when every step is done, so a push in between renders what
    // the node runs instead of moving those components back.
    kubernetesComponents: text('kubernetes_components', { mode: 'json' }).$type<Record<string, string>>(),
    createdAt: createdAt(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [uniqueIndex('machines_cluster_name').on(t.clusterId, t.name)],
);

export const RUN_STATES = ['queued', 'running', 'succeeded', 'failed', 'canceled', 'interrupted'] as const;
export type RunState = (typeof RUN_STATES)[number];

export const runs = sqliteTable(
  'runs',
  {
    id: text('id').primaryKey(),
    kind: text('kind').notNull(),
    tenantId: text('tenant_id'),
    clusterId: text('cluster_id'),
    // 1 when the run must not overlap others with the same lock key (a cluster-changing run locks
    // its cluster id; a collect pass locks 'collect'). The partial unique index admits one active.
    exclusive: integer('exclusive', { mode: 'boolean' }).notNull(),
    lockKey: text('lock_key'),
    state: text('state', { enum: RUN_STATES }).notNull(),
    params: text('params', { mode: 'json' }).$type<Record<string, unknown>>().notNull(),
    result: text('result', { mode: 'json' }).$type<unknown>(),
    error: text('error'),
    cancelRequested: integer('cancel_requested', { mode: 'boolean' }).notNull().default(false),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: integer('lease_expires_at'),
    attempt: integer('attempt').notNull().default(0),
    createdBy: text('created_by'),
    createdAt: createdAt(),
    startedAt: integer('started_at'),
    finishedAt: integer('finished_at'),
  },
  (t) => [
    index('runs_queue').on(t.state, t.createdAt),
    index('runs_cluster').on(t.clusterId, t.createdAt),
    uniqueIndex('runs_one_active_per_lock')
      .on(t.lockKey)
      .where(sql`${t.exclusive} = 1 AND ${t.state} IN ('queued', 'running')`),
  ],
);

export const runEvents = sqliteTable(
  'run_events',
  {
    runId: text('run_id')
      .notNull()
      .references(() => runs.id, { onDelete: 'cascade' }),
    seq: integer('seq').notNull(),
    at: integer('at').notNull(),
    level: text('level', { enum: ['info', 'warn', 'error'] }).notNull(),
    type: text('type').notNull(),
    message: text('message').notNull(),
    data: text('data', { mode: 'json' }).$type<Record<string, unknown>>(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.seq] })],
);

export const audit = sqliteTable(
  'audit',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    at: integer('at').notNull(),
    actor: text('actor').notNull(),
    tenantId: text('tenant_id'),
    action: text('action').notNull(),
    target: text('target').notNull(),
    detail: text('detail', { mode: 'json' }).$type<Record<string, unknown>>(),
  },
  (t) => [index('audit_tenant_at').on(t.tenantId, t.at)],
);
