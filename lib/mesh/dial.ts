// Where RezusCloud dials a machine: its overlay address once the node holds a config with the
// mesh document, else the direct address. Portable: routes and executors can both use it.
import type { Db } from '../../db/client.ts';
import type { Sealer } from '../crypto/seal.ts';
import type { ConfigDocument } from '../talos/patch.ts';
import { type Hub, listPeers, loadClusterMesh, loadHub, loadPeer, nodeEndpoint, peerAddresses, peerKeyContext, type PeerRow } from './store.ts';
import { nodeWireguardDocument } from './talos-doc.ts';

/**
 * A node is on the overlay only once a config carrying its WireguardConfig was delivered to it
 * (`deliveredEndpoint`). Until then (maintenance mode, or a node configured before the cluster
 * turned the mesh on) the direct address is the only way in: dialling the overlay would lock us
 * out of the very push that brings the node onto the mesh.
 */
const onOverlay = (peer: Pick<PeerRow, 'deliveredEndpoint'>) => peer.deliveredEndpoint !== null;

/** The overlay IPv4 of a mesh node, or `direct` (the caller's v1 address, e.g. talosAddressOf(m)). */
export async function dialAddress(db: Db, machineId: string, direct: string | null): Promise<string | null> {
  const peer = await loadPeer(db, machineId);
  return peer ? (await meshDialer(db, peer.clusterId)).address(machineId, direct) : direct;
}

export interface MeshDialer {
  /** The machine's overlay IPv4 when it is on the mesh, else `direct`. */
  address(machineId: string, direct: string | null): string | null;
  /**
   * The Kubernetes API endpoint to use from here: the cluster's own, or, on a mesh cluster, the
   * same port on the overlay address of the first control plane on the mesh (the apiserver's
   * certificate carries every node address, overlay ones included).
   */
  kubeEndpoint(endpoint: string, controlPlanes: readonly string[]): string;
}

const passThrough: MeshDialer = { address: (_id, direct) => direct, kubeEndpoint: (endpoint) => endpoint };

/** One lookup for a whole cluster (three queries with the mesh on, one without), then answers from memory. */
export async function meshDialer(db: Db, clusterId: string): Promise<MeshDialer> {
  if (!(await loadClusterMesh(db, clusterId))) return passThrough;
  const hub = await loadHub(db);
  if (!hub) return passThrough;
  const overlay = new Map((await listPeers(db, clusterId)).filter(onOverlay).map((p) => [p.machineId, peerAddresses(hub, p).ipv4]));
  return {
    address: (id, direct) => overlay.get(id) ?? direct,
    kubeEndpoint(endpoint, controlPlanes) {
      const cp = controlPlanes.find((id) => overlay.has(id));
      if (!cp) return endpoint;
      const url = new URL(endpoint);
      url.hostname = overlay.get(cp) as string;
      return url.toString().replace(/\/$/, '');
    },
  };
}

export interface MeshDelivery {
  /** The WireguardConfig document, or [] when the machine is not in a mesh or its cluster has no endpoint yet. */
  documents: ConfigDocument[];
  /** The hub endpoint those documents dial; what markDelivered records once the config is delivered. */
  endpoint: string | null;
}

function documentFor(sealer: Sealer, hub: Hub, peer: PeerRow, endpoint: string): ConfigDocument {
  const addrs = peerAddresses(hub, peer);
  return nodeWireguardDocument({
    privateKey: sealer.openText(peer.privateKeySealed, peerKeyContext(peer.machineId)),
    ...addrs,
    ipv4PrefixLength: hub.v4.length,
    ipv6PrefixLength: hub.v6.length,
    hubPublicKey: hub.row.publicKey,
    hubIpv4: hub.addresses.ipv4,
    hubIpv6: hub.addresses.ipv6,
    endpoint,
  });
}

/** What a machine's generated config carries for the mesh. Holds the node's private key: treat it like the config itself. */
export async function meshDelivery(deps: { db: Db; sealer: Sealer }, machineId: string): Promise<MeshDelivery> {
  const peer = await loadPeer(deps.db, machineId);
  if (!peer) return { documents: [], endpoint: null };
  const [cluster, hub] = [await loadClusterMesh(deps.db, peer.clusterId), await loadHub(deps.db)];
  const endpoint = cluster && nodeEndpoint(cluster, peer);
  if (!hub || !endpoint) return { documents: [], endpoint: null };
  return { documents: [documentFor(deps.sealer, hub, peer, endpoint)], endpoint };
}

/** meshDelivery for every machine of a cluster at once (provision renders them all). */
export async function clusterMeshDeliveries(deps: { db: Db; sealer: Sealer }, clusterId: string): Promise<Map<string, MeshDelivery>> {
  const out = new Map<string, MeshDelivery>();
  const cluster = await loadClusterMesh(deps.db, clusterId);
  const hub = cluster && (await loadHub(deps.db));
  if (!cluster || !hub) return out;
  for (const peer of await listPeers(deps.db, clusterId)) {
    const endpoint = nodeEndpoint(cluster, peer);
    if (endpoint) out.set(peer.machineId, { documents: [documentFor(deps.sealer, hub, peer, endpoint)], endpoint });
  }
  return out;
}

/**
 * The WireguardConfig document for a mesh node's generated config (pass it as
 * `extraDocuments` to renderMachineConfig), or [] when the machine is not in a mesh or its cluster
 * has no endpoint yet.
 */
export async function meshDocuments(deps: { db: Db; sealer: Sealer }, machineId: string): Promise<ConfigDocument[]> {
  return (await meshDelivery(deps, machineId)).documents;
}
