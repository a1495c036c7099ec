import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export const SCOPES = ['read', 'write', 'secrets:read'] as const;
export type Scope = (typeof SCOPES)[number];
export const DEFAULT_TENANT_SCOPES: Scope[] = ['read', 'write'];

const PREFIX = 'rzs_';

export function generateToken(): string {
  return PREFIX + randomBytes(32).toString('base64url');
}

/** Tokens have 256 bits of entropy, so an unsalted SHA-256 is enough to store them. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export function tokensEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** Parses `Authorization: Bearer <token>`; anything else is no token. */
export function bearerToken(header: string | undefined | null): string | null {
  if (!header) return null;
  const m = /^Bearer\s+(\S+)$/i.exec(header.trim());
  return m?.[1] ?? null;
}
