// One address grammar for the whole project: lib/talos/net.ts, which also runs on Workers.
import { parseIp } from '../net.ts';

const isIPv4 = (host: string) => parseIp(host)?.family === 4;
const isIPv6 = (host: string) => parseIp(host)?.family === 6;

/** apid's port; the Go client appends it to endpoints that have none. */
export const TALOS_API_PORT = 50000;

export interface NodeAddress {
  host: string;
  port: number;
}

export class InvalidNodeAddressError extends Error {
  override name = 'InvalidNodeAddressError';
}

const HOSTNAME_LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;
const DOTTED_NUMBERS = /^[0-9.]+$/;

function describe(input: string): string {
  const shown = input.length > 80 ? `${input.slice(0, 80)}…` : input;
  return JSON.stringify(shown);
}

function parsePort(text: string, input: string): number {
  if (!/^[0-9]{1,5}$/.test(text)) {
    throw new InvalidNodeAddressError(`invalid Talos node address ${describe(input)}: port must be a number`);
  }
  const port = Number(text);
  if (port < 1 || port > 65535) {
    throw new InvalidNodeAddressError(`invalid Talos node address ${describe(input)}: port out of range 1-65535`);
  }
  return port;
}

function isHostname(host: string): boolean {
  if (host.length === 0 || host.length > 253) return false;
  // A dotted-number string that is not a valid IPv4 address is a typo, not a hostname.
  if (DOTTED_NUMBERS.test(host)) return false;
  const labels = host.endsWith('.') ? host.slice(0, -1).split('.') : host.split('.');
  return labels.every((l) => HOSTNAME_LABEL.test(l));
}

/**
 * Parses `host`, `host:port`, bare IPv6 (`2001:db8::10`) or bracketed IPv6 with optional port
 * (`[2001:db8::10]:50123`). The port defaults to 50000.
 */
export function parseNodeAddress(address: string): NodeAddress {
  if (typeof address !== 'string') throw new InvalidNodeAddressError('Talos node address must be a string');
  const input = address.trim();
  if (input.length === 0) throw new InvalidNodeAddressError('Talos node address is empty');
  if (/\s|\/|@/.test(input)) {
    throw new InvalidNodeAddressError(`invalid Talos node address ${describe(input)}: expected host, host:port or [ipv6]:port`);
  }

  if (input.startsWith('[')) {
    const close = input.indexOf(']');
    if (close < 0) throw new InvalidNodeAddressError(`invalid Talos node address ${describe(input)}: missing ']'`);
    const host = input.slice(1, close);
    if (!isIPv6(host)) throw new InvalidNodeAddressError(`invalid Talos node address ${describe(input)}: not an IPv6 address inside brackets`);
    const rest = input.slice(close + 1);
    if (rest === '') return { host, port: TALOS_API_PORT };
    if (!rest.startsWith(':')) throw new InvalidNodeAddressError(`invalid Talos node address ${describe(input)}: unexpected text after ']'`);
    return { host, port: parsePort(rest.slice(1), input) };
  }

  // Two or more colons without brackets can only be a bare IPv6 address.
  if (input.indexOf(':') !== input.lastIndexOf(':')) {
    if (isIPv6(input)) return { host: input, port: TALOS_API_PORT };
    throw new InvalidNodeAddressError(`invalid Talos node address ${describe(input)}: not a valid IPv6 address (use [addr]:port to give a port)`);
  }

  let host = input;
  let port = TALOS_API_PORT;
  const colon = input.indexOf(':');
  if (colon >= 0) {
    host = input.slice(0, colon);
    port = parsePort(input.slice(colon + 1), input);
  }
  if (isIPv4(host) || isHostname(host)) return { host: host.toLowerCase(), port };
  throw new InvalidNodeAddressError(`invalid Talos node address ${describe(input)}: not an IP address or hostname`);
}

/** `host:port`, with IPv6 hosts bracketed: also the gRPC target string. */
export function formatNodeAddress(addr: NodeAddress): string {
  return isIPv6(addr.host) ? `[${addr.host}]:${addr.port}` : `${addr.host}:${addr.port}`;
}

export function grpcTarget(address: string | NodeAddress): string {
  return formatNodeAddress(typeof address === 'string' ? parseNodeAddress(address) : address);
}

export function isIpLiteral(host: string): boolean {
  return parseIp(host) !== undefined;
}
