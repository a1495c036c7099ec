// Where RezusCloud dials a machine: its overlay address when its cluster's mesh is on, else the
// direct address. Portable: routes and executors can both use it.
import type { Db } from '../../db/client.ts';
import type { Sealer } from '../crypto/seal.ts';
import type { ConfigDocument } from '../talos/patch.ts';
import { loadClusterMesh, loadHub, loadPeer, nodeEndpoint, peerAddresses, peerKeyContext } from './store.ts';
import { nodeWireguardDocument } from './talos-doc.ts';

/** The overlay IPv4 of a mesh node, or `direct` (the caller's v1 address, e.g. talosAddressOf(m)). */
export async function dialAddress(db: Db, machineId: string, direct: string | null): Promise<string | null> {
  const peer = await loadPeer(db, machineId);
  if (!peer || !(await loadClusterMesh(db, peer.clusterId))) return direct;
  const hub = await loadHub(db);
  return hub ? peerAddresses(hub, peer).ipv4 : direct;
}

/**
 * The WireguardConfig document for a mesh node's generated config (pass it as
 * `extraDocuments` to renderMachineConfig), or [] when the machine is not in a mesh or its cluster
 * has no endpoint yet. Holds the node's private key: treat the result like the config itself.
 */
export async function meshDocuments(deps: { db: Db; sealer: Sealer }, machineId: string): Promise<ConfigDocument[]> {
  const peer = await loadPeer(deps.db, machineId);
  if (!peer) return [];
  const [cluster, hub] = [await loadClusterMesh(deps.db, peer.clusterId), await loadHub(deps.db)];
  const endpoint = cluster && nodeEndpoint(cluster, peer);
  if (!hub || !endpoint) return [];
  const addrs = peerAddresses(hub, peer);
  return [
    nodeWireguardDocument({
      privateKey: deps.sealer.openText(peer.privateKeySealed, peerKeyContext(machineId)),
      ...addrs,
      ipv4PrefixLength: hub.v4.length,
      ipv6PrefixLength: hub.v6.length,
      hubPublicKey: hub.row.publicKey,
      hubIpv4: hub.addresses.ipv4,
      hubIpv6: hub.addresses.ipv6,
      endpoint,
    }),
  ];
}
