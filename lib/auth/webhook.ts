import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'X-Rezus-Signature';
const SIGNATURE = /^sha256=([0-9a-fA-F]{64})$/;

const hmac = (secret: string | Uint8Array, body: Uint8Array) => createHmac('sha256', secret).update(body).digest();

/** The header value a sender puts in `X-Rezus-Signature` for this body. */
export function signBody(secret: string | Uint8Array, rawBody: Uint8Array): string {
  return `sha256=${hmac(secret, rawBody).toString('hex')}`;
}

/**
 * Checks `sha256=<hex HMAC-SHA256(secret, body)>` over the exact bytes received (re-serialised
 * JSON would differ). Malformed or missing headers are simply false; the compare is constant-time.
 */
export function verifySignature(secret: string | Uint8Array, rawBody: Uint8Array, header: string | null | undefined): boolean {
  if (typeof header !== 'string') return false;
  const m = SIGNATURE.exec(header.trim());
  if (!m) return false;
  if (typeof secret === 'string' ? secret.length === 0 : secret.byteLength === 0) return false;
  const sent = Buffer.from(m[1]!, 'hex');
  return timingSafeEqual(sent, hmac(secret, rawBody));
}

export function generateWebhookSecret(): string {
  return 'whsec_' + randomBytes(32).toString('base64url');
}
