// The networks the runner may dial for Talos and Kubernetes APIs (REZUS_NODE_NETWORKS). Pure, so
// the Worker's API checks addresses against the same list the runner enforces at dial time.
import { cidrsOverlap, parseCidr, parseIp, type ParsedCidr, type ParsedIp } from './net.ts';

/** The code of a dial the list refused, on the error a connection attempt ends with. */
export const DIAL_NOT_ALLOWED = 'ERR_DIAL_NOT_ALLOWED';

export interface NodeNetworks {
  readonly cidrs: readonly ParsedCidr[];
  /** The list as the operator wrote it, for messages. */
  readonly text: string;
}

/** `10.0.0.0/8, 2001:db8::/32`; an empty text is no list (any address may be dialled). */
export function parseNodeNetworks(text: string): NodeNetworks | undefined {
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) return undefined;
  const cidrs = items.map((item) => {
    const c = parseCidr(item);
    if (!c) throw new Error(`not a network in CIDR form (e.g. 192.168.1.0/24 or 2001:db8::/48): ${JSON.stringify(item)}`);
    if (c.hostBitsSet) throw new Error(`${item} has bits set below its prefix; did you mean its network address?`);
    return c;
  });
  return { cidrs, text: items.join(',') };
}

/** ::ffff:192.0.2.1 is 192.0.2.1 on the wire: an IPv4 list covers it. */
function unmapped(ip: ParsedIp): ParsedIp {
  if (ip.family === 6 && ip.value >> 32n === 0xffffn) return { family: 4, value: ip.value & 0xffffffffn };
  return ip;
}

/** Whether every address of `cidr` is inside one network of the list. */
export function networksCover(networks: NodeNetworks, cidr: ParsedCidr): boolean {
  return networks.cidrs.some((c) => c.prefix <= cidr.prefix && cidrsOverlap(c, cidr));
}

export function networksInclude(networks: NodeNetworks, ip: ParsedIp): boolean {
  const one = unmapped(ip);
  return networksCover(networks, { family: one.family, network: one.value, prefix: one.family === 4 ? 32 : 128, hostBitsSet: false });
}

export function notAllowedText(what: string, networks: NodeNetworks): string {
  return `${what} is outside the networks the runner may dial (REZUS_NODE_NETWORKS=${networks.text})`;
}

/**
 * Why `host` may not be dialled, for an IP literal outside the list; undefined otherwise. A name
 * passes here: what it resolves to is checked when it is dialled, since that can change.
 */
export function literalOutside(host: string, networks: NodeNetworks | undefined): string | undefined {
  if (!networks) return undefined;
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const ip = parseIp(bare);
  if (!ip || networksInclude(networks, ip)) return undefined;
  return notAllowedText(bare, networks);
}
