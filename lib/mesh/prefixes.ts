// Overlay addressing: every mesh member has one host index; its IPv4 and IPv6 addresses are that
// index added to the network address of each prefix, so one stored integer gives both and they
// cannot drift apart. Index 1 is the hub.
import { cidrsOverlap, formatIp, parseCidr, parseIp, type ParsedCidr } from '../talos/net.ts';

export const DEFAULT_IPV4_PREFIX = '100.64.0.0/10';
export const HUB_INDEX = 1;
/** Nodes start here; index 0 is the network address. */
export const FIRST_NODE_INDEX = 2;

export interface Prefix {
  family: 4 | 6;
  network: bigint;
  length: number;
  text: string;
}

export class InvalidPrefixError extends Error {
  override name = 'InvalidPrefixError';
}

const bigToIp = (family: 4 | 6, value: bigint) => formatIp({ family, value });

/** Ranges no overlay address and no endpoint may come from: they never reach across networks. */
const SPECIAL: Array<{ cidr: ParsedCidr; what: string }> = [
  ['0.0.0.0/8', 'unspecified'], ['127.0.0.0/8', 'loopback'], ['169.254.0.0/16', 'link-local'], ['224.0.0.0/4', 'multicast'], ['240.0.0.0/4', 'reserved or broadcast'],
  ['::/128', 'unspecified'], ['::1/128', 'loopback'], ['fe80::/10', 'link-local'], ['ff00::/8', 'multicast'],
].map(([text, what]) => ({ cidr: parseCidr(text!)!, what: what! }));

/**
 * Why a prefix or an endpoint someone asks for cannot serve a mesh of separate hosts, if it cannot
 * (the range it touches: loopback, link-local…). Asked of what comes in through the API only: the
 * library itself takes any prefix, as a test does to lay an overlay over loopback.
 */
export function unroutable(text: string): string | undefined {
  const host = /^\[([0-9a-fA-F:.]+)\]:\d+$/.exec(text)?.[1] ?? /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(text)?.[1] ?? text;
  const ip = parseIp(host);
  const cidr: ParsedCidr | undefined = parseCidr(text) ?? (ip && { family: ip.family, network: ip.value, prefix: ip.family === 4 ? 32 : 128, hostBitsSet: false });
  return cidr ? SPECIAL.find((s) => cidrsOverlap(s.cidr, cidr))?.what : undefined;
}

/** Ranges a hub's address may be in on its own network but not as seen from the internet. */
const LOCAL: Array<{ cidr: ParsedCidr; what: string }> = [
  ['10.0.0.0/8', 'private (RFC 1918)'], ['172.16.0.0/12', 'private (RFC 1918)'], ['192.168.0.0/16', 'private (RFC 1918)'],
  ['100.64.0.0/10', 'carrier-grade NAT (RFC 6598)'], ['fc00::/7', 'unique local (RFC 4193)'],
].map(([text, what]) => ({ cidr: parseCidr(text!)!, what: what! }));

/**
 * Why nodes on other networks could not dial `address`, if they could not: one of unroutable's
 * ranges, or a private one. A STUN server that reports such a mapping shares the hub's network (a
 * LAN or VPN server, say), so what it saw is not the hub's address on the internet.
 */
export function localOnly(address: string): string | undefined {
  const ip = parseIp(address);
  if (!ip) return undefined;
  const cidr: ParsedCidr = { family: ip.family, network: ip.value, prefix: ip.family === 4 ? 32 : 128, hostBitsSet: false };
  return [...SPECIAL, ...LOCAL].find((s) => cidrsOverlap(s.cidr, cidr))?.what;
}

export function parsePrefix(text: string): Prefix {
  const cidr = parseCidr(text);
  if (!cidr) throw new InvalidPrefixError(`${JSON.stringify(text)} is not a prefix such as 100.64.0.0/10`);
  const { family, network: value, prefix: length } = cidr;
  if (cidr.hostBitsSet) throw new InvalidPrefixError(`${text}: host bits must be zero`);
  const bits = family === 4 ? 32 : 128;
  // Room for the network address, the hub and at least one node.
  if (length > bits - 2) throw new InvalidPrefixError(`${text}: prefix length must be at most /${bits - 2}`);
  if (length < (family === 4 ? 8 : 48)) throw new InvalidPrefixError(`${text}: prefix is too wide for an overlay`);
  return { family, network: value, length, text: `${bigToIp(family, value)}/${length}` };
}

/** How many host indexes a prefix offers (the broadcast address of IPv4 excluded). */
export function capacity(prefix: Prefix): bigint {
  const hostBits = BigInt((prefix.family === 4 ? 32 : 128) - prefix.length);
  return (1n << hostBits) - (prefix.family === 4 ? 1n : 0n);
}

export function addressAt(prefix: Prefix, index: number): string {
  if (index < 1 || BigInt(index) >= capacity(prefix)) throw new InvalidPrefixError(`index ${index} is outside ${prefix.text}`);
  return bigToIp(prefix.family, prefix.network + BigInt(index));
}

/** The largest index both prefixes can hold, capped to keep it a safe JS integer. */
export function maxIndex(prefixes: Prefix[]): number {
  const cap = prefixes.reduce((m, p) => (capacity(p) - 1n < m ? capacity(p) - 1n : m), BigInt(Number.MAX_SAFE_INTEGER));
  return Number(cap);
}

/** A random ULA /64 (RFC 4193: fd00::/8 + 40-bit global id + 16-bit subnet), fixed once stored. */
export function randomUlaPrefix(random: (n: number) => Uint8Array): string {
  const b = random(7);
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  const value = (0xfdn << 120n) | (BigInt(`0x${hex}`) << 64n);
  return `${bigToIp(6, value)}/64`;
}

export interface MemberAddresses {
  ipv4: string;
  ipv6: string;
}

export function memberAddresses(v4: Prefix, v6: Prefix, index: number): MemberAddresses {
  return { ipv4: addressAt(v4, index), ipv6: addressAt(v6, index) };
}

/** `ip:port` with IPv6 bracketed and lowercase: the only endpoint form Talos accepts. */
export function parseEndpointLiteral(text: string): { host: string; port: number; text: string } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|(\d{1,3}(?:\.\d{1,3}){3})):(\d{1,5})$/.exec(text.trim());
  const ip = parseIp(m?.[1] ?? m?.[2] ?? '');
  const port = Number(m?.[3]);
  if (!m || !ip || port < 1 || port > 65535) {
    throw new InvalidPrefixError('must be an IP literal with a port, e.g. 203.0.113.7:51820 or [2001:db8::7]:51820 (Talos resolves no names)');
  }
  const canonical = formatIp(ip);
  return { host: canonical, port, text: ip.family === 6 ? `[${canonical}]:${port}` : `${canonical}:${port}` };
}
