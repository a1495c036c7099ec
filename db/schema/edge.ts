import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { tenants } from './core.ts';

/**
 * A second copy of each tenant's webhook secret, sealed with the edge key (REZUS_EDGE_KEY) instead
 * of the master key, so a Worker can verify deliveries without holding the master key. Written at
 * home when the secret is minted or rotated; the master-sealed copy in webhook_secrets stays the
 * home runner's own.
 */
export const webhookEdgeSecrets = sqliteTable('webhook_edge_secrets', {
  tenantId: text('tenant_id')
    .primaryKey()
    .references(() => tenants.id, { onDelete: 'cascade' }),
  secretSealed: text('secret_sealed').notNull(),
  createdAt: integer('created_at').notNull(),
});
