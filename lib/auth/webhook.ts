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

export const TIMESTAMP_HEADER = 'X-Rezus-Timestamp';
export const DELIVERY_HEADER = 'X-Rezus-Delivery';
/** GitHub's own headers: `sha256=<hex HMAC-SHA256(secret, body)>` and a delivery GUID. */
export const GITHUB_SIGNATURE_HEADER = 'X-Hub-Signature-256';
export const GITHUB_DELIVERY_HEADER = 'X-GitHub-Delivery';
/** A signed request older or newer than this is refused, so a captured one cannot be replayed later. */
export const SIGNATURE_WINDOW_S = 300;
const DELIVERY_SIGNATURE = /^v1=([0-9a-fA-F]{64})$/;

function deliveryMac(secret: string | Uint8Array, timestamp: string, deliveryId: string, rawBody: Uint8Array): Buffer {
  return createHmac('sha256', secret).update(`${timestamp}.${deliveryId}.`, 'utf8').update(rawBody).digest();
}

/** `X-Rezus-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>.<delivery id>." + raw body)>`. */
export function signDelivery(secret: string | Uint8Array, timestamp: string, deliveryId: string, rawBody: Uint8Array): string {
  return `v1=${deliveryMac(secret, timestamp, deliveryId, rawBody).toString('hex')}`;
}

export type DeliveryCheck = { ok: true } | { ok: false; reason: 'bad_signature' | 'stale' };

/**
 * Verifies a RezusCloud-scheme delivery: the timestamp (unix seconds) must be within
 * SIGNATURE_WINDOW_S of `nowMs`, and the signature must cover timestamp, delivery id and body.
 */
export function verifyDelivery(
  secret: string | Uint8Array,
  rawBody: Uint8Array,
  h: { signature?: string | null; timestamp?: string | null; deliveryId?: string | null },
  nowMs: number,
): DeliveryCheck {
  const m = typeof h.signature === 'string' ? DELIVERY_SIGNATURE.exec(h.signature.trim()) : null;
  if (!m || !h.timestamp || !/^\d{1,12}$/.test(h.timestamp) || !h.deliveryId) return { ok: false, reason: 'bad_signature' };
  if (typeof secret === 'string' ? secret.length === 0 : secret.byteLength === 0) return { ok: false, reason: 'bad_signature' };
  if (!timingSafeEqual(Buffer.from(m[1]!, 'hex'), deliveryMac(secret, h.timestamp, h.deliveryId, rawBody))) return { ok: false, reason: 'bad_signature' };
  if (Math.abs(nowMs / 1000 - Number(h.timestamp)) > SIGNATURE_WINDOW_S) return { ok: false, reason: 'stale' };
  return { ok: true };
}
