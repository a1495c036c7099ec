import { Buffer } from 'node:buffer';

/** A 32-byte key given as 64 hex characters or base64 (master key, edge key); `name` is for the error. */
export function parseKey32(text: string, name: string): Buffer {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (key.length !== 32) throw new Error(`${name} must be 32 bytes, as 64 hex characters or base64`);
  return key;
}
