// The node side of the mesh: a Talos `WireguardConfig` document (multi-doc kind, Talos v1.12+).
import type { ConfigDocument } from '../talos/patch.ts';

export const NODE_LINK_NAME = 'rzmesh0';
export const KEEPALIVE = '25s';
/** 1420 fits an IPv4 underlay; 40 bytes less leaves room for PPPoE and CGNAT paths on either side. */
export const NODE_MTU = 1380;

export interface NodeMeshInput {
  privateKey: string;
  /** the node's overlay addresses */
  ipv4: string;
  ipv6: string;
  /** prefix lengths of the overlay; the node's address carries them so its connected route covers the hub */
  ipv4PrefixLength: number;
  ipv6PrefixLength: number;
  hubPublicKey: string;
  hubIpv4: string;
  hubIpv6: string;
  /** `ip:port`, an IP literal: Talos resolves no names here */
  endpoint: string;
  linkName?: string;
  mtu?: number;
}

/**
 * One peer, the hub, allowed only the hub's own addresses: the node never routes anything else
 * through RezusCloud, and the hub cannot be used to reach other nodes' overlay addresses.
 * Talos adds no routes for allowedIPs, so the address prefix is what routes hub traffic into the link.
 */
export function nodeWireguardDocument(input: NodeMeshInput): ConfigDocument {
  return {
    apiVersion: 'v1alpha1',
    kind: 'WireguardConfig',
    name: input.linkName ?? NODE_LINK_NAME,
    privateKey: input.privateKey,
    mtu: input.mtu ?? NODE_MTU,
    addresses: [
      { address: `${input.ipv4}/${input.ipv4PrefixLength}` },
      { address: `${input.ipv6}/${input.ipv6PrefixLength}` },
    ],
    peers: [
      {
        publicKey: input.hubPublicKey,
        endpoint: input.endpoint,
        persistentKeepaliveInterval: KEEPALIVE,
        allowedIPs: [`${input.hubIpv4}/32`, `${input.hubIpv6}/128`],
      },
    ],
  };
}
