import { and, eq, isNotNull, lte, notInArray } from 'drizzle-orm';
import { randomBytes } from 'node:crypto';
import { clusters, stateCredentials, stateLocks } from '../../db/schema/index.ts';
import { hashToken, tokensEqual } from '../../lib/auth/tokens.ts';
import type { Deps } from '../context.ts';

type CredDeps = Pick<Deps, 'db' | 'clock'>;

export interface StateCredential {
  username: string;
  password: string;
}

/** Who a valid basic-auth credential speaks for. */
export interface StateCaller {
  runId: string;
  tenantId: string;
  clusterId: string;
}

/**
 * Mints the basic-auth pair one provision run hands to tofu (`TF_HTTP_USERNAME`/`TF_HTTP_PASSWORD`).
 * Minting again for the same run replaces the earlier password.
 */
export async function mintStateCredential(
  deps: CredDeps,
  opts: { runId: string; tenantId: string; clusterId: string; ttlMs: number },
): Promise<StateCredential> {
  if (!(opts.ttlMs > 0)) throw new Error('ttlMs must be positive');
  if (opts.runId.includes(':')) throw new Error('run id cannot contain ":" (basic auth separator)');
  const cluster = await deps.db.select({ tenantId: clusters.tenantId }).from(clusters).where(eq(clusters.id, opts.clusterId)).get();
  if (!cluster || cluster.tenantId !== opts.tenantId) throw new Error(`cluster ${opts.clusterId} does not belong to tenant ${opts.tenantId}`);
  const password = randomBytes(32).toString('base64url');
  const now = deps.clock.now();
  const row = {
    runId: opts.runId,
    tenantId: opts.tenantId,
    clusterId: opts.clusterId,
    hash: hashToken(password),
    expiresAt: now + opts.ttlMs,
    createdAt: now,
  };
  await deps.db
    .insert(stateCredentials)
    .values(row)
    .onConflictDoUpdate({ target: stateCredentials.runId, set: { ...row } });
  return { username: opts.runId, password };
}

/**
 * Ends a run's access to the state backend. A lock the run still holds is released too: tofu
 * that crashed mid-apply leaves its lock behind, and no one else can ever present its ID.
 */
export async function revokeStateCredential(deps: CredDeps, runId: string): Promise<{ releasedLock: boolean }> {
  await deps.db.delete(stateCredentials).where(eq(stateCredentials.runId, runId));
  const released = await deps.db.delete(stateLocks).where(eq(stateLocks.heldBy, runId)).returning({ id: stateLocks.clusterId });
  return { releasedLock: released.length > 0 };
}

/** Parses `Authorization: Basic …`; anything else is no credential. */
export function basicCredentials(header: string | undefined | null): { username: string; password: string } | null {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header?.trim() ?? '');
  if (!m) return null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) return null;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

export async function checkStateCredential(deps: CredDeps, username: string, password: string): Promise<StateCaller | null> {
  const row = await deps.db.select().from(stateCredentials).where(eq(stateCredentials.runId, username)).get();
  // Compare even when there is no row, so a missing run id and a wrong password take the same path.
  const ok = tokensEqual(hashToken(password), row?.hash ?? '');
  if (!row || !ok || row.expiresAt <= deps.clock.now()) return null;
  return { runId: row.runId, tenantId: row.tenantId, clusterId: row.clusterId };
}

/**
 * Drops credentials whose expiry passed, and the state locks their runs still hold: once a run's
 * credential is gone its tofu can write nothing, so the lock protects nothing any more (this is
 * the policy end of a lock kept by an interrupted run whose process could not be seen to die).
 */
export async function pruneStateCredentials(deps: CredDeps): Promise<number> {
  const gone = await deps.db.delete(stateCredentials).where(lte(stateCredentials.expiresAt, deps.clock.now())).returning({ id: stateCredentials.runId });
  await deps.db
    .delete(stateLocks)
    .where(and(isNotNull(stateLocks.heldBy), notInArray(stateLocks.heldBy, deps.db.select({ id: stateCredentials.runId }).from(stateCredentials))));
  return gone.length;
}
