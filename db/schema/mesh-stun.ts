import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';

/**
 * What the hub last learned about its public side from STUN (runner/jobs/mesh/stun.ts): one row.
 * Clusters whose endpoint source is `stun` dial `endpoint`.
 */
export const meshStun = sqliteTable('mesh_stun', {
  // Always 'hub'.
  id: text('id').primaryKey(),
  // lib/mesh/stun.ts NatMapping: none | endpoint-independent | endpoint-dependent | unknown.
  mapping: text('mapping').notNull(),
  // The public address STUN saw; the port nodes dial is the hub's listen port (forwarded on the router).
  publicAddress: text('public_address'),
  // ip:port for nodes, null when unusable (symmetric NAT or no answer).
  endpoint: text('endpoint'),
  observed: text('observed', { mode: 'json' }).$type<{ server: string; mapped: string | null; error?: string }[]>().notNull(),
  checkedAt: integer('checked_at').notNull(),
  // When `endpoint` last changed to its current value.
  changedAt: integer('changed_at'),
});
