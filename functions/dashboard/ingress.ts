import type { Context } from 'hono';
import { SCOPES } from '../../lib/auth/tokens.ts';
import type { Principal } from '../context.ts';

/** The Home Assistant Supervisor's address on its internal network; ingress traffic comes from here only. */
export const SUPERVISOR_ADDRESS = '172.30.32.2';

/** Where a request came from; injectable so tests (and other hosts) can say. */
export type RemoteAddressSource = (c: Context) => string | undefined;

/** Without a platform adapter the peer is unknown, and an unknown peer is never the Supervisor. */
export const unknownRemoteAddress: RemoteAddressSource = () => undefined;

/** An IPv4 peer on a dual-stack socket shows as ::ffff:a.b.c.d; it is the same peer. */
export function normalizeAddress(addr: string): string {
  const m = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(addr);
  return m ? m[1]! : addr.toLowerCase();
}

// The Supervisor sends /api/hassio_ingress/<token>; accept any plain absolute path, nothing that
// could leave the origin or break out of an attribute.
const INGRESS_PATH = /^(\/[A-Za-z0-9._~-]+)+$/;

export interface IngressDecision {
  /** Prefix for every link, form and asset URL; '' outside ingress. */
  base: string;
  trusted: boolean;
}

export function ingressDecision(
  c: Context,
  opts: { trustIngress: boolean; trustedPeer: string; remoteAddress: RemoteAddressSource },
): IngressDecision {
  const header = c.req.header('x-ingress-path');
  if (!opts.trustIngress || header === undefined) return { base: '', trusted: false };
  const peer = opts.remoteAddress(c);
  if (!peer || normalizeAddress(peer) !== normalizeAddress(opts.trustedPeer)) return { base: '', trusted: false };
  const path = header.replace(/\/+$/, '');
  if (!INGRESS_PATH.test(path) || path.split('/').some((seg) => seg === '..' || seg === '.')) return { base: '', trusted: false };
  return { base: path, trusted: true };
}

/** Home Assistant authenticated the user (HA admins only reach an add-on panel by default). */
export const INGRESS_PRINCIPAL: Principal = Object.freeze({
  tokenId: 'ha-ingress',
  tenantId: null,
  scopes: [...SCOPES],
  admin: true,
});
