import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * AES-256-GCM sealing of secrets at rest. The context string is bound as additional data, so a
 * sealed value copied into another row (another cluster's secrets, another tenant's state) fails
 * to open instead of being silently accepted.
 */
export interface Sealer {
  seal(plaintext: string | Uint8Array, context: string): string;
  open(sealed: string, context: string): Buffer;
  openText(sealed: string, context: string): string;
}

export class SealError extends Error {
  override name = 'SealError';
}

export function createSealer(masterKey: Uint8Array): Sealer {
  if (masterKey.length !== 32) throw new SealError('master key must be 32 bytes');
  const key = Buffer.from(masterKey);

  const open = (sealed: string, context: string): Buffer => {
    const [version, payload] = sealed.split(':', 2);
    if (version !== VERSION || !payload) throw new SealError('unknown sealed value format');
    const raw = Buffer.from(payload, 'base64');
    if (raw.length < IV_BYTES + TAG_BYTES) throw new SealError('sealed value too short');
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
    } catch {
      throw new SealError('sealed value does not open with this master key and context');
    }
  };

  return {
    seal(plaintext, context) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const data = typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : plaintext;
      const ct = Buffer.concat([cipher.update(data), cipher.final()]);
      return `${VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64')}`;
    },
    open,
    openText: (sealed, context) => open(sealed, context).toString('utf8'),
  };
}
