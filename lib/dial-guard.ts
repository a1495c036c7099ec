// Every connection the runner opens to a tenant-given address (Talos API, Kubernetes API, a look at
// a port) goes through one of these when REZUS_NODE_NETWORKS is set. Names are checked on what
// they resolve to at each dial, so one that points elsewhere, now or later, is refused too.
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { parseIp } from './talos/net.ts';
import { DIAL_NOT_ALLOWED, literalOutside, networksInclude, notAllowedText, type NodeNetworks } from './talos/node-networks.ts';

export { DIAL_NOT_ALLOWED };

export class DialNotAllowedError extends Error {
  override name = 'DialNotAllowedError';
  readonly code = DIAL_NOT_ALLOWED;
}

export interface DialGuard {
  /** The refusal for an IP literal outside the networks; undefined for one inside, or a name. */
  refusal(host: string): DialNotAllowedError | undefined;
  /** A `lookup` for net/tls connect options: only addresses inside the networks come back. */
  lookup: LookupFunction;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

export function createDialGuard(networks: NodeNetworks): DialGuard {
  const lookup = (hostname: string, options: LookupOneOptions | LookupAllOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const allowed = addresses.filter((a) => {
        const ip = parseIp(a.address);
        return ip !== undefined && networksInclude(networks, ip);
      });
      if (allowed.length === 0) {
        const found = addresses.map((a) => a.address).join(', ') || 'nothing';
        return callback(new DialNotAllowedError(notAllowedText(`${hostname} (resolves to ${found})`, networks)), []);
      }
      if (options.all) return callback(null, allowed);
      callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  };
  return {
    refusal(host) {
      const why = literalOutside(host, networks);
      return why === undefined ? undefined : new DialNotAllowedError(why);
    },
    lookup: lookup as LookupFunction,
  };
}

const guards = new WeakMap<NodeNetworks, DialGuard>();

/** The guard of a settings' list (one per list), or none when any address may be dialled. */
export function guardFor(networks: NodeNetworks | undefined): DialGuard | undefined {
  if (!networks) return undefined;
  let g = guards.get(networks);
  if (!g) guards.set(networks, (g = createDialGuard(networks)));
  return g;
}
