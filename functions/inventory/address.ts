import { isIP } from 'node:net';

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i;
const portOk = (p: string | undefined) => p === undefined || (/^\d+$/.test(p) && Number(p) >= 1 && Number(p) <= 65535);

/** host, [v6]:port, v4:port, bare IPv6 — the forms a Talos API address takes. */
export function isNodeAddress(v: string): boolean {
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(v);
  if (bracketed) return isIP(bracketed[1]!) === 6 && portOk(bracketed[2]);
  if (isIP(v) === 6) return true;
  const [host = '', port, extra] = v.split(':');
  if (extra !== undefined) return false;
  return (isIP(host) === 4 || HOSTNAME.test(host)) && portOk(port);
}

/** The host part of a node address, without brackets or port. */
export function addressHost(v: string): string {
  const bracketed = /^\[([^\]]+)\]/.exec(v);
  if (bracketed) return bracketed[1]!;
  if (isIP(v) === 6) return v;
  return v.split(':')[0]!;
}
