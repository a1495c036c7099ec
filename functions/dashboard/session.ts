import { randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { Sealer } from '../../lib/crypto/seal.ts';

export const SESSION_COOKIE = 'rezus_session';
const CONTEXT = 'session';
export const SESSION_TTL_MS = 12 * 3600 * 1000;

/**
 * What the session cookie carries, sealed with the master key (AES-GCM, context "session"): the
 * token the user pasted, so the browser never holds it in clear, and the CSRF secret of the
 * session. A visitor who has not logged in still has a session, so the login form is protected too.
 */
export interface Session {
  /** Identifies the session server-side, so logout can end it for every copy of the cookie. */
  sid: string;
  csrf: string;
  token?: string;
  /** Epoch ms after which the session is void. */
  exp: number;
}

const sessionSchema = z.strictObject({
  sid: z.string().min(16),
  csrf: z.string().min(20),
  token: z.string().min(1).optional(),
  exp: z.number(),
});

export function newSession(now: number, token?: string, ttlMs = SESSION_TTL_MS): Session {
  return { sid: randomBytes(18).toString('base64url'), csrf: randomBytes(24).toString('base64url'), exp: now + ttlMs, ...(token ? { token } : {}) };
}

export function sealSession(sealer: Sealer, s: Session): string {
  return sealer.seal(JSON.stringify(s), CONTEXT);
}

/** A cookie that does not open, does not parse or has expired is no session. */
export function openSession(sealer: Sealer, cookie: string | undefined, now: number): Session | null {
  if (!cookie) return null;
  try {
    const res = sessionSchema.safeParse(JSON.parse(sealer.openText(cookie, CONTEXT)));
    if (!res.success || res.data.exp <= now) return null;
    return res.data;
  } catch {
    return null;
  }
}

export function csrfMatches(session: Session, submitted: unknown): boolean {
  if (typeof submitted !== 'string' || submitted.length === 0) return false;
  const a = Buffer.from(session.csrf);
  const b = Buffer.from(submitted);
  return a.length === b.length && timingSafeEqual(a, b);
}
