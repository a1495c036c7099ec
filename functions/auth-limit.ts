import { createMiddleware } from 'hono/factory';
import type { Context } from 'hono';
import type { AppEnv } from './context.ts';
import type { RemoteAddressSource } from './dashboard/ingress.ts';

export interface AuthLimitOptions {
  /** Failed attempts a client may make per window before it is refused with 429. */
  maxFailures?: number;
  windowMs?: number;
  /** The peer address; without one every client shares one bucket (still bounded, never open). */
  remoteAddress?: RemoteAddressSource;
  /** The counts, when they must outlive the app (the edge builds an app per request). */
  limiter?: FailureLimiter;
}

const DEFAULTS = { maxFailures: 20, windowMs: 60_000 };
/** Bounded memory: past this many clients, expired entries are dropped; if none are, the oldest go. */
const MAX_CLIENTS = 10_000;

/**
 * Counts failed authentications (401 answers) per client in fixed windows. In memory and per
 * runner on purpose: it slows guessing of tokens, state credentials and webhook secrets down to
 * `maxFailures` per window per address, without a database write on the hot path.
 */
export class FailureLimiter {
  private readonly clients = new Map<string, { failures: number; resetAt: number }>();
  constructor(
    readonly maxFailures: number,
    readonly windowMs: number,
  ) {}

  /** Seconds until this client may try again, or 0 if it may now. */
  retryAfterS(key: string, now: number): number {
    const e = this.clients.get(key);
    if (!e || now >= e.resetAt || e.failures < this.maxFailures) return 0;
    return Math.max(1, Math.ceil((e.resetAt - now) / 1000));
  }

  fail(key: string, now: number): void {
    let e = this.clients.get(key);
    if (!e || now >= e.resetAt) {
      if (!e && this.clients.size >= MAX_CLIENTS) this.evict(now);
      e = { failures: 0, resetAt: now + this.windowMs };
      this.clients.set(key, e);
    }
    e.failures++;
  }

  private evict(now: number): void {
    for (const [k, v] of this.clients) if (now >= v.resetAt) this.clients.delete(k);
    while (this.clients.size >= MAX_CLIENTS) this.clients.delete(this.clients.keys().next().value!);
  }
}

export const failureLimiter = (opts: Pick<AuthLimitOptions, 'maxFailures' | 'windowMs'> = {}): FailureLimiter =>
  new FailureLimiter(opts.maxFailures ?? DEFAULTS.maxFailures, opts.windowMs ?? DEFAULTS.windowMs);

/** A request that tries to authenticate: a credential header, a dashboard login, a webhook. */
function isAttempt(c: Context): boolean {
  if (c.req.header('authorization') !== undefined) return true;
  const path = c.req.path;
  return (c.req.method === 'POST' && /\/login$/.test(path)) || path.startsWith('/v1/hooks/');
}

export function authFailureLimit(opts: AuthLimitOptions = {}) {
  const limiter = opts.limiter ?? failureLimiter(opts);
  const addressOf = opts.remoteAddress ?? (() => undefined);
  return createMiddleware<AppEnv>(async (c, next) => {
    if (!isAttempt(c)) return next();
    const key = addressOf(c) ?? 'unknown';
    const now = c.var.deps.clock.now();
    const wait = limiter.retryAfterS(key, now);
    if (wait > 0) {
      return c.json({ error: { code: 'rate_limited', message: `too many failed sign-in attempts; retry in ${wait} s` } }, 429, { 'retry-after': String(wait) });
    }
    await next();
    if (c.res.status === 401) limiter.fail(key, c.var.deps.clock.now());
  });
}
