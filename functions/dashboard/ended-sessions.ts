import { eq, lt } from 'drizzle-orm';
import { endedSessions } from '../../db/schema/index.ts';
import type { Deps } from '../context.ts';
import type { Session } from './session.ts';

/** Logout: the session id is listed until the cookie would have expired anyway (then pruned). */
export async function endSession(deps: Pick<Deps, 'db' | 'clock'>, s: Session): Promise<void> {
  await deps.db.delete(endedSessions).where(lt(endedSessions.expiresAt, deps.clock.now()));
  await deps.db.insert(endedSessions).values({ sid: s.sid, expiresAt: s.exp }).onConflictDoNothing();
}

export async function isEnded(deps: Pick<Deps, 'db'>, s: Session): Promise<boolean> {
  return (await deps.db.select({ sid: endedSessions.sid }).from(endedSessions).where(eq(endedSessions.sid, s.sid)).get()) !== undefined;
}
