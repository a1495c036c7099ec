import { eq } from 'drizzle-orm';
import { createMiddleware } from 'hono/factory';
import { tokens } from '../db/schema/index.ts';
import type { AppEnv, Principal } from './context.ts';
import { ApiError } from '../lib/http/errors.ts';
import { SCOPES, bearerToken, hashToken, tokensEqual, type Scope } from '../lib/auth/tokens.ts';

const unauthorized = () => new ApiError(401, 'unauthorized', 'missing or invalid bearer token');

export async function authenticate(deps: AppEnv['Variables']['deps'], token: string | null): Promise<Principal | null> {
  if (!token) return null;
  const envAdmin = deps.settings.adminToken;
  if (envAdmin && tokensEqual(token, envAdmin)) {
    return { tokenId: 'env-admin', tenantId: null, scopes: [...SCOPES], admin: true };
  }
  // Lookup is by SHA-256 of the token, so timing reveals nothing about stored tokens.
  const row = await deps.db.select().from(tokens).where(eq(tokens.hash, hashToken(token))).get();
  if (!row) return null;
  const admin = row.tenantId === null;
  return { tokenId: row.id, tenantId: row.tenantId, scopes: admin ? [...SCOPES] : (row.scopes as Scope[]), admin };
}

/**
 * The dashboard calls the API in-process with the principal it already authenticated (a session
 * token, or Home Assistant ingress). The key is a symbol in the request's env bindings, which no
 * request from outside can carry.
 */
export const DISPATCH_PRINCIPAL: unique symbol = Symbol('rezus.dispatchPrincipal');

function dispatchedPrincipal(env: unknown): Principal | undefined {
  if (typeof env !== 'object' || env === null) return undefined;
  return (env as { [DISPATCH_PRINCIPAL]?: Principal })[DISPATCH_PRINCIPAL];
}

export const requireAuth = createMiddleware<AppEnv>(async (c, next) => {
  const principal =
    dispatchedPrincipal(c.env) ?? (await authenticate(c.var.deps, bearerToken(c.req.header('authorization'))));
  if (!principal) throw unauthorized();
  c.set('principal', principal);
  await next();
});

export function requireScope(scope: Scope) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const p = c.var.principal;
    if (!p.admin && !p.scopes.includes(scope)) {
      throw new ApiError(403, 'forbidden', `this token lacks the "${scope}" scope`);
    }
    await next();
  });
}

export const requireAdmin = createMiddleware<AppEnv>(async (c, next) => {
  if (!c.var.principal.admin) throw new ApiError(403, 'forbidden', 'this needs an admin token');
  await next();
});

/** A tenant token sees only its own tenant; anything else is reported as absent, never as forbidden. */
export function canSeeTenant(p: Principal, tenantId: string): boolean {
  return p.admin || p.tenantId === tenantId;
}
