import { ApiError } from '../../lib/http/errors.ts';
import { InvalidNodeAddressError, parseNodeAddress } from '../../lib/talos/api/address.ts';
import { literalOutside, type NodeNetworks } from '../../lib/talos/node-networks.ts';

/** host, [v6]:port, v4:port, bare IPv6 — the forms a Talos API address takes. */
export function isNodeAddress(v: string): boolean {
  try {
    parseNodeAddress(v);
    return true;
  } catch (err) {
    if (err instanceof InvalidNodeAddressError) return false;
    throw err;
  }
}

/** The host part of a node address, without brackets or port. */
export function addressHost(v: string): string {
  return parseNodeAddress(v).host;
}

/**
 * 400 for an IP literal outside REZUS_NODE_NETWORKS, before anything is written; the runner would
 * never dial it. A name is taken: it is checked on what it resolves to each time it is dialled.
 */
export function refuseOutsideNetworks(networks: NodeNetworks | undefined, host: string, field: string): void {
  const why = literalOutside(host, networks);
  if (why) throw new ApiError(400, 'address_not_allowed', `${field}: ${why}`, { field });
}
