import { InvalidNodeAddressError, parseNodeAddress } from '../../lib/talos/api/address.ts';

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
