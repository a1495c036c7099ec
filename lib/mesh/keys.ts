// WireGuard keys are raw 32-byte X25519 scalars/points in standard base64; node:crypto speaks JWK,
// whose `d` (private) and `x` (public) are the same bytes in base64url.
import { createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';

export interface WireguardKeyPair {
  privateKey: string;
  publicKey: string;
}

const KEY_B64 = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;

export class InvalidWireguardKeyError extends Error {
  override name = 'InvalidWireguardKeyError';
}

const toB64 = (b64url: string) => Buffer.from(b64url, 'base64url').toString('base64');

/** True for a canonical base64 encoding of 32 bytes, the only form `wg` and Talos accept. */
export function isWireguardKey(value: string): boolean {
  return KEY_B64.test(value) && Buffer.from(value, 'base64').length === 32;
}

export function generateKeyPair(): WireguardKeyPair {
  const { privateKey } = generateKeyPairSync('x25519');
  const jwk = privateKey.export({ format: 'jwk' });
  if (!jwk.d || !jwk.x) throw new Error('x25519 JWK export lacks key material');
  return { privateKey: toB64(jwk.d), publicKey: toB64(jwk.x) };
}

/** `wg pubkey`: the public key of a base64 private key (clamping is part of X25519 itself). */
export function publicKeyOf(privateKey: string): string {
  if (!isWireguardKey(privateKey)) throw new InvalidWireguardKeyError('private key must be 32 bytes in base64');
  const raw = Buffer.from(privateKey, 'base64');
  // X25519 JWK import requires `x`; derive it through a PKCS#8 wrapper instead (RFC 8410 prefix).
  const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b656e04220420', 'hex'), raw]);
  const key = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  const jwk = createPublicKey(key).export({ format: 'jwk' });
  if (!jwk.x) throw new Error('x25519 JWK export lacks the public key');
  return toB64(jwk.x);
}

