// Desired mesh state in the database: the hub's identity, which clusters opted in and where their
// nodes dial, and one row per node. Portable (no Node-only imports): routes on Workers use it too.
import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { meshClusters, meshHub, meshPeers } from '../../db/schema/index.ts';
import type { Clock } from '../clock.ts';
import type { Sealer } from '../crypto/seal.ts';
import { generateKeyPair, type WireguardKeyPair } from './keys.ts';
import {
  DEFAULT_IPV4_PREFIX, FIRST_NODE_INDEX, HUB_INDEX, maxIndex, memberAddresses, parsePrefix, randomUlaPrefix, type Prefix,
} from './prefixes.ts';

export const HUB_ROW_ID = 'hub';
export const DEFAULT_INTERFACE = 'rzhub0';
export const DEFAULT_LISTEN_PORT = 51820;

export interface MeshStoreDeps {
  db: Db;
  sealer: Sealer;
  clock: Clock;
  /** Key pairs and random ULA prefixes; tests may fix them. */
  newKeyPair?: () => WireguardKeyPair;
  randomBytes?: (n: number) => Uint8Array;
}

export type HubRow = typeof meshHub.$inferSelect;
export type MeshClusterRow = typeof meshClusters.$inferSelect;
export type PeerRow = typeof meshPeers.$inferSelect;
export type RelaySettings = NonNullable<MeshClusterRow['relay']>;

export class MeshConflictError extends Error {
  override name = 'MeshConflictError';
}
export class MeshExhaustedError extends Error {
  override name = 'MeshExhaustedError';
}

export const hubKeyContext = () => 'mesh:hub';
export const peerKeyContext = (machineId: string) => `mesh:peer:${machineId}`;

export interface HubSettings {
  ipv4Prefix?: string;
  ipv6Prefix?: string;
  listenPort?: number;
  interfaceName?: string;
}

export interface Hub {
  row: HubRow;
  v4: Prefix;
  v6: Prefix;
  addresses: { ipv4: string; ipv6: string };
}

export function hubOf(row: HubRow): Hub {
  const v4 = parsePrefix(row.ipv4Prefix);
  const v6 = parsePrefix(row.ipv6Prefix);
  return { row, v4, v6, addresses: memberAddresses(v4, v6, HUB_INDEX) };
}

const cryptoRandom = (n: number) => crypto.getRandomValues(new Uint8Array(n));

/** The hub row, created on first use. Prefixes are fixed at creation; asking for others is a conflict. */
export async function ensureHub(deps: MeshStoreDeps, want: HubSettings = {}): Promise<Hub> {
  const v4 = parsePrefix(want.ipv4Prefix ?? DEFAULT_IPV4_PREFIX);
  const v6 = parsePrefix(want.ipv6Prefix ?? randomUlaPrefix(deps.randomBytes ?? cryptoRandom));
  if (v4.family !== 4) throw new MeshConflictError('ipv4Prefix must be an IPv4 prefix');
  if (v6.family !== 6) throw new MeshConflictError('ipv6Prefix must be an IPv6 prefix');
  const keys = (deps.newKeyPair ?? generateKeyPair)();
  // Two first enables racing both insert; the primary key keeps the first, the second reads it.
  await deps.db
    .insert(meshHub)
    .values({
      id: HUB_ROW_ID,
      interfaceName: want.interfaceName ?? DEFAULT_INTERFACE,
      listenPort: want.listenPort ?? DEFAULT_LISTEN_PORT,
      privateKeySealed: deps.sealer.seal(keys.privateKey, hubKeyContext()),
      publicKey: keys.publicKey,
      ipv4Prefix: v4.text,
      ipv6Prefix: v6.text,
      createdAt: deps.clock.now(),
    })
    .onConflictDoNothing();
  const row = await deps.db.select().from(meshHub).where(eq(meshHub.id, HUB_ROW_ID)).get();
  if (!row) throw new Error('mesh hub row vanished');
  const clash = (field: string, asked: string | number | undefined, has: string | number) =>
    asked !== undefined && String(asked) !== String(has) ? [`${field} is ${has}`] : [];
  const clashes = [
    ...clash('ipv4Prefix', want.ipv4Prefix === undefined ? undefined : v4.text, row.ipv4Prefix),
    ...clash('ipv6Prefix', want.ipv6Prefix === undefined ? undefined : v6.text, row.ipv6Prefix),
    ...clash('listenPort', want.listenPort, row.listenPort),
  ];
  if (clashes.length > 0) throw new MeshConflictError(`the hub already exists and ${clashes.join(', ')}; addresses of existing nodes would change`);
  return hubOf(row);
}

export async function loadHub(db: Db): Promise<Hub | null> {
  const row = await db.select().from(meshHub).where(eq(meshHub.id, HUB_ROW_ID)).get();
  return row ? hubOf(row) : null;
}

export function hubPrivateKey(deps: Pick<MeshStoreDeps, 'sealer'>, hub: Hub): string {
  return deps.sealer.openText(hub.row.privateKeySealed, hubKeyContext());
}

export async function setClusterMesh(
  deps: MeshStoreDeps,
  clusterId: string,
  target: { endpoint: string | null; endpointSource: 'configured' | 'stun'; relay: RelaySettings | null },
): Promise<MeshClusterRow> {
  const values = { clusterId, ...target, updatedAt: deps.clock.now() };
  await deps.db
    .insert(meshClusters)
    .values(values)
    .onConflictDoUpdate({ target: meshClusters.clusterId, set: { endpoint: values.endpoint, endpointSource: values.endpointSource, relay: values.relay, updatedAt: values.updatedAt } });
  return (await loadClusterMesh(deps.db, clusterId)) as MeshClusterRow;
}

export async function loadClusterMesh(db: Db, clusterId: string): Promise<MeshClusterRow | null> {
  return (await db.select().from(meshClusters).where(eq(meshClusters.clusterId, clusterId)).get()) ?? null;
}

export async function disableClusterMesh(db: Db, clusterId: string): Promise<void> {
  await db.delete(meshPeers).where(eq(meshPeers.clusterId, clusterId));
  await db.delete(meshClusters).where(eq(meshClusters.clusterId, clusterId));
}

function isUniqueViolation(err: unknown): boolean {
  const text = String((err as { message?: string })?.message ?? err) + String((err as { cause?: unknown })?.cause ?? '');
  return /UNIQUE constraint failed|SQLITE_CONSTRAINT/.test(text);
}

const MAX_ATTEMPTS = 50;

/**
 * Throws MeshExhaustedError, before anything is written, when the hub's prefixes (the stored hub's,
 * or those it would be created with) cannot give every machine of `machineIds` without an
 * address one: a PUT that ran out half-way would leave some peers allocated and answer 409.
 */
export async function ensureRoom(db: Db, hub: { v4: Prefix; v6?: Prefix }, machineIds: string[]): Promise<{ highestIndex: number }> {
  const taken = await db.select({ machineId: meshPeers.machineId }).from(meshPeers).all();
  const has = new Set(taken.map((p) => p.machineId));
  const wanted = machineIds.filter((id) => !has.has(id)).length;
  const room = maxIndex(hub.v6 ? [hub.v4, hub.v6] : [hub.v4]) - FIRST_NODE_INDEX + 1 - taken.length;
  if (wanted > room) {
    throw new MeshExhaustedError(`${hub.v4.text}${hub.v6 ? ` / ${hub.v6.text}` : ''} has room for ${Math.max(0, room)} more node(s); this cluster needs ${wanted}`);
  }
  // Indexes are given lowest first, so none goes past the count of members.
  return { highestIndex: FIRST_NODE_INDEX - 1 + taken.length + wanted };
}

/**
 * The machine's mesh row, allocating the lowest free host index if it has none. The index is picked
 * inside the INSERT itself, so one database serialises racing allocations; the unique index is the
 * backstop (e.g. a replica that answers a stale read) and a lost race simply tries again.
 */
export async function allocatePeer(deps: MeshStoreDeps, hub: Hub, clusterId: string, machineId: string): Promise<PeerRow> {
  const limit = maxIndex([hub.v4, hub.v6]);
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const existing = await deps.db.select().from(meshPeers).where(eq(meshPeers.machineId, machineId)).get();
    if (existing) {
      if (existing.clusterId !== clusterId) throw new MeshConflictError('machine belongs to another cluster');
      return existing;
    }
    const keys = (deps.newKeyPair ?? generateKeyPair)();
    try {
      const rows = await deps.db.all<{ host_index: number }>(sql`
        INSERT INTO mesh_peers (machine_id, cluster_id, host_index, private_key_sealed, public_key, created_at)
        SELECT ${machineId}, ${clusterId}, c, ${deps.sealer.seal(keys.privateKey, peerKeyContext(machineId))}, ${keys.publicKey}, ${deps.clock.now()}
        FROM (SELECT MIN(c) AS c FROM (SELECT ${FIRST_NODE_INDEX} AS c UNION ALL SELECT host_index + 1 FROM mesh_peers)
              WHERE c NOT IN (SELECT host_index FROM mesh_peers))
        WHERE c <= ${limit}
        RETURNING host_index`);
      if (rows.length === 0) throw new MeshExhaustedError(`no free overlay address left in ${hub.v4.text} / ${hub.v6.text}`);
      const row = await deps.db.select().from(meshPeers).where(eq(meshPeers.machineId, machineId)).get();
      if (row) return row;
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
    }
  }
  throw new MeshConflictError(`could not allocate an overlay address after ${MAX_ATTEMPTS} attempts`);
}

export async function listPeers(db: Db, clusterId: string): Promise<PeerRow[]> {
  return db.select().from(meshPeers).where(eq(meshPeers.clusterId, clusterId)).orderBy(meshPeers.hostIndex).all();
}

export async function listAllPeers(db: Db): Promise<PeerRow[]> {
  return db.select().from(meshPeers).orderBy(meshPeers.hostIndex).all();
}

export async function loadPeer(db: Db, machineId: string): Promise<PeerRow | null> {
  return (await db.select().from(meshPeers).where(eq(meshPeers.machineId, machineId)).get()) ?? null;
}

export function peerAddresses(hub: Hub, peer: Pick<PeerRow, 'hostIndex'>) {
  return memberAddresses(hub.v4, hub.v6, peer.hostIndex);
}

/** Where this node's WireGuard dials the hub: its relay port pair, else the cluster's endpoint. */
export function nodeEndpoint(cluster: Pick<MeshClusterRow, 'endpoint' | 'relay'>, peer: Pick<PeerRow, 'hostIndex'>): string | null {
  if (cluster.relay) return joinHostPort(cluster.relay.address, cluster.relay.nodePortBase + peer.hostIndex);
  return cluster.endpoint;
}

/** Where the hub sends to reach a relayed node (the relay's hub-facing port); null when the node dials in directly. */
export function hubSideEndpoint(cluster: Pick<MeshClusterRow, 'relay'>, peer: Pick<PeerRow, 'hostIndex'>): string | null {
  if (!cluster.relay) return null;
  return joinHostPort(cluster.relay.address, cluster.relay.hubPortBase + peer.hostIndex);
}

export function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Records which hub endpoint the node's delivered config carries (after a push or a provision). */
export async function markDelivered(db: Db, machineId: string, endpoint: string | null): Promise<void> {
  await deliveredUpdate(db, machineId, endpoint);
}

/** markDelivered as a statement, to go in the same batch (one commit) as the caller's own writes. */
export function deliveredUpdate(db: Db, machineId: string, endpoint: string | null) {
  return deliveredUpdateAll(db, [machineId], endpoint);
}

/** deliveredUpdate for several machines given the same endpoint, in one statement (a cluster push's nodes). */
export function deliveredUpdateAll(db: Db, machineIds: string[], endpoint: string | null) {
  return db.update(meshPeers).set({ deliveredEndpoint: endpoint }).where(inArray(meshPeers.machineId, machineIds));
}

export interface AffectedMachine {
  machineId: string;
  delivered: string;
  wanted: string | null;
}

/**
 * Nodes whose delivered config dials an endpoint other than the one they should now dial (the
 * hub's public address moved, or the cluster switched to or from a relay). Nodes never delivered
 * a mesh config are not listed: their first config will carry the new endpoint anyway.
 */
export async function affectedMachines(db: Db, clusterId: string): Promise<AffectedMachine[]> {
  const cluster = await loadClusterMesh(db, clusterId);
  if (!cluster) return [];
  const peers = await db
    .select()
    .from(meshPeers)
    .where(and(eq(meshPeers.clusterId, clusterId), sql`${meshPeers.deliveredEndpoint} IS NOT NULL`))
    .orderBy(meshPeers.hostIndex)
    .all();
  return peers
    .map((p) => ({ machineId: p.machineId, delivered: p.deliveredEndpoint as string, wanted: nodeEndpoint(cluster, p) }))
    .filter((a) => a.delivered !== a.wanted);
}
