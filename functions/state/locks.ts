import { and, eq } from 'drizzle-orm';
import { stateLocks } from '../../db/schema/index.ts';
import type { Deps } from '../context.ts';
import { lockHolder } from './store.ts';

type LockDeps = Pick<Deps, 'db' | 'clock'>;

export const MAX_LOCK_INFO_BYTES = 64 * 1024;

/**
 * The LockInfo document tofu sends with LOCK and UNLOCK. Only `ID` matters to the backend; the
 * rest is kept verbatim so a refused locker sees who holds the lock in tofu's own words.
 */
export interface LockRequest {
  id: string;
  raw: string;
}

export function parseLockInfo(text: string): LockRequest | null {
  if (text.length === 0 || text.length > MAX_LOCK_INFO_BYTES) return null;
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return null;
  const id = (doc as Record<string, unknown>).ID;
  if (typeof id !== 'string' || id.length === 0 || id.length > 256) return null;
  return { id, raw: text };
}

export type LockOutcome = { acquired: true } | { acquired: false; holderInfo: string };

export async function acquireLock(
  deps: LockDeps,
  input: { tenantId: string; clusterId: string; lock: LockRequest; heldBy: string | null },
): Promise<LockOutcome> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const inserted = await deps.db
      .insert(stateLocks)
      .values({
        clusterId: input.clusterId,
        tenantId: input.tenantId,
        lockId: input.lock.id,
        info: input.lock.raw,
        heldBy: input.heldBy,
        createdAt: deps.clock.now(),
      })
      .onConflictDoNothing()
      .returning({ id: stateLocks.lockId });
    if (inserted.length) return { acquired: true };
    const holder = await lockHolder(deps, input.clusterId);
    // The same ID again from the same holder is tofu retrying a LOCK whose answer it never got;
    // from anyone else it is an ID read off a 423, which takes nothing.
    if (holder?.lockId === input.lock.id && holder.heldBy === input.heldBy) return { acquired: true };
    if (holder) return { acquired: false, holderInfo: holder.info };
    // Released between our insert and our read: try again.
  }
  throw new Error('state lock changed hands too often; retry');
}

export type UnlockOutcome = { released: boolean } | { conflict: true; holderInfo: string };

/**
 * UNLOCK by the lock's holder: the run whose credential took it, presenting its ID. Knowing the
 * ID is not enough (it is in every refused locker's 423 answer); anyone else needs the admin
 * force-unlock.
 */
export async function releaseLock(deps: LockDeps, clusterId: string, lockId: string, runId: string | null): Promise<UnlockOutcome> {
  if (runId === null) {
    const holder = await lockHolder(deps, clusterId);
    return holder ? { conflict: true, holderInfo: holder.info } : { released: false };
  }
  const gone = await deps.db
    .delete(stateLocks)
    .where(and(eq(stateLocks.clusterId, clusterId), eq(stateLocks.lockId, lockId), eq(stateLocks.heldBy, runId)))
    .returning({ id: stateLocks.lockId });
  if (gone.length) return { released: true };
  const holder = await lockHolder(deps, clusterId);
  if (holder) return { conflict: true, holderInfo: holder.info };
  // Unlocking a free state is what a retried UNLOCK looks like; nothing to do.
  return { released: false };
}

/** Admin force-unlock: removes whatever lock is held and returns it. */
export async function forceReleaseLock(deps: LockDeps, clusterId: string) {
  const [row] = await deps.db.delete(stateLocks).where(eq(stateLocks.clusterId, clusterId)).returning();
  return row ?? null;
}
