import { integer, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';
import { clusters, machines } from './core.ts';

// The v2 WireGuard hub (ADR 20). One hub per RezusCloud: one interface, one key pair, one listen
// port, and one address space, so overlay addresses never collide between clusters on the host.
export const meshHub = sqliteTable('mesh_hub', {
  // Always 'hub': a single row, created by the first cluster that turns the mesh on.
  id: text('id').primaryKey(),
  interfaceName: text('interface_name').notNull(),
  listenPort: integer('listen_port').notNull(),
  privateKeySealed: text('private_key_sealed').notNull(),
  publicKey: text('public_key').notNull(),
  ipv4Prefix: text('ipv4_prefix').notNull(),
  ipv6Prefix: text('ipv6_prefix').notNull(),
  createdAt: integer('created_at').notNull(),
});

/** A cluster that opted in: where its nodes dial the hub (an IP literal, or a relay). */
export const meshClusters = sqliteTable('mesh_clusters', {
  clusterId: text('cluster_id')
    .primaryKey()
    .references(() => clusters.id, { onDelete: 'cascade' }),
  // `configured` (the operator gave it), `stun` (discovered); the relay overrides both.
  endpointSource: text('endpoint_source', { enum: ['configured', 'stun'] }).notNull(),
  endpoint: text('endpoint'),
  // A relay: nodes dial relayAddress:nodePortBase+index, the hub dials relayAddress:hubPortBase+index.
  relay: text('relay', { mode: 'json' }).$type<{ address: string; nodePortBase: number; hubPortBase: number }>(),
  updatedAt: integer('updated_at').notNull(),
});

/**
 * One row per mesh node. `hostIndex` is unique across the hub, so two allocations racing for the
 * same address cannot both commit; the row stays as long as the machine does, so an address is
 * never handed to another node while assigned.
 */
export const meshPeers = sqliteTable(
  'mesh_peers',
  {
    machineId: text('machine_id')
      .primaryKey()
      .references(() => machines.id, { onDelete: 'cascade' }),
    clusterId: text('cluster_id')
      .notNull()
      .references(() => clusters.id, { onDelete: 'cascade' }),
    // Both overlay addresses derive from it and the hub's prefixes (lib/mesh/prefixes.ts).
    hostIndex: integer('host_index').notNull(),
    privateKeySealed: text('private_key_sealed').notNull(),
    publicKey: text('public_key').notNull(),
    // The hub endpoint written into the config this node last received; a differing effective
    // endpoint means its config must be re-pushed.
    deliveredEndpoint: text('delivered_endpoint'),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [uniqueIndex('mesh_peers_host_index').on(t.hostIndex), uniqueIndex('mesh_peers_public_key').on(t.publicKey)],
);
