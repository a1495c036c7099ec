import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';
import { clusters, tenants } from './core.ts';

/**
 * Every tofu state a cluster ever had. A write adds a row; nothing is updated in place except
 * `deleted_at`, which a backend DELETE sets so history survives a purge.
 */
export const stateVersions = sqliteTable(
  'state_versions',
  {
    tenantId: text('tenant_id')
      .notNull()
      .references(() => tenants.id, { onDelete: 'cascade' }),
    clusterId: text('cluster_id')
      .notNull()
      .references(() => clusters.id, { onDelete: 'cascade' }),
    // Ours, 1, 2, 3… per cluster; `serial` is tofu's own counter inside the state JSON.
    version: integer('version').notNull(),
    serial: integer('serial').notNull(),
    lineage: text('lineage').notNull(),
    // Sealed with context `state:<cluster>:<version>`: a body moved to another row does not open.
    bodySealed: text('body_sealed').notNull(),
    // Base64 MD5 of the plaintext, sent back as Content-MD5.
    md5: text('md5').notNull(),
    size: integer('size').notNull(),
    writtenBy: text('written_by'),
    createdAt: integer('created_at').notNull(),
    deletedAt: integer('deleted_at'),
  },
  (t) => [primaryKey({ columns: [t.clusterId, t.version] }), index('state_versions_tenant').on(t.tenantId)],
);

/** At most one lock per cluster; the primary key is what makes LOCK atomic. */
export const stateLocks = sqliteTable('state_locks', {
  clusterId: text('cluster_id')
    .primaryKey()
    .references(() => clusters.id, { onDelete: 'cascade' }),
  tenantId: text('tenant_id').notNull(),
  lockId: text('lock_id').notNull(),
  // The LockInfo JSON exactly as tofu sent it; a refused locker gets it back verbatim.
  info: text('info').notNull(),
  heldBy: text('held_by'),
  createdAt: integer('created_at').notNull(),
});

/** Per-run basic-auth credentials for the state backend; only a SHA-256 of the password is kept. */
export const stateCredentials = sqliteTable(
  'state_credentials',
  {
    runId: text('run_id').primaryKey(),
    tenantId: text('tenant_id')
      .notNull()
      .references(() => tenants.id, { onDelete: 'cascade' }),
    clusterId: text('cluster_id')
      .notNull()
      .references(() => clusters.id, { onDelete: 'cascade' }),
    hash: text('hash').notNull(),
    expiresAt: integer('expires_at').notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [index('state_credentials_expiry').on(t.expiresAt)],
);

export const PROVIDER_CREDENTIAL_KINDS = ['oci', 'openstack', 'hetzner', 'aws'] as const;
export type CredentialProvider = (typeof PROVIDER_CREDENTIAL_KINDS)[number];

/** Cloud credentials a tenant's tofu runs get as environment variables. */
export const providerCredentials = sqliteTable(
  'provider_credentials',
  {
    tenantId: text('tenant_id')
      .notNull()
      .references(() => tenants.id, { onDelete: 'cascade' }),
    provider: text('provider', { enum: PROVIDER_CREDENTIAL_KINDS }).notNull(),
    // Sealed JSON object NAME → value, context `creds:<tenant>:<provider>`.
    envSealed: text('env_sealed').notNull(),
    // The variable names in clear, so listing never needs to open the values.
    names: text('names', { mode: 'json' }).$type<string[]>().notNull(),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.provider] })],
);

/** The HMAC secret a tenant's webhook senders sign with; sealed because verifying needs it in clear. */
export const webhookSecrets = sqliteTable('webhook_secrets', {
  tenantId: text('tenant_id')
    .primaryKey()
    .references(() => tenants.id, { onDelete: 'cascade' }),
  secretSealed: text('secret_sealed').notNull(),
  createdAt: integer('created_at').notNull(),
});

/** Delivery ids already acted on, so a redelivered webhook starts no second run. */
export const webhookDeliveries = sqliteTable(
  'webhook_deliveries',
  {
    tenantId: text('tenant_id')
      .notNull()
      .references(() => tenants.id, { onDelete: 'cascade' }),
    deliveryId: text('delivery_id').notNull(),
    runId: text('run_id'),
    /**
     * A GitHub delivery refused (a run was active, say) is kept with the cluster and mode its URL
     * named: GitHub signs only the body, so its redelivery may start the run later, but its bytes
     * sent to another cluster or with another `?mode=` may not. Null for every other row.
     */
    refusedFor: text('refused_for'),
    receivedAt: integer('received_at').notNull(),
  },
  (t) => [uniqueIndex('webhook_deliveries_tenant_delivery').on(t.tenantId, t.deliveryId), index('webhook_deliveries_received').on(t.receivedAt)],
);
