import { and, asc, desc, eq, gt, inArray, lt, sql } from 'drizzle-orm';
import type { Db, DbStatement } from '../../db/client.ts';
import { runEvents, runs } from '../../db/schema/index.ts';
import { newId } from '../ids.ts';
import type { Clock } from '../clock.ts';
import type { RunBus } from './bus.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { EnqueueInput, Run, RunEvent, RunEventInput, RunState } from './types.ts';

export class ActiveRunConflict extends Error {
  constructor(readonly activeRunId: string) {
    super(`an active run holds this lock: ${activeRunId}`);
  }
}

export type Jobs = ReturnType<typeof createJobs>;

const ACTIVE: RunState[] = ['queued', 'running'];

/**
 * The run queue. Every transition is a single conditional UPDATE, so the database decides who
 * wins when two workers (or a worker and a canceler) race; nothing relies on in-process locks.
 */
/** The caller's rows that commit with a new run (given its id) or not at all. */
export type Alongside = (runId: string) => DbStatement[];

export function createJobs(deps: { db: Db; clock: Clock; bus: RunBus }) {
  const { db, clock, bus } = deps;

  /**
   * INSERT … SELECT of a run's events, numbered after the existing ones in order. The state check
   * is part of the statement, so a worker that lost its lease (paused, partitioned) cannot add
   * anything after the terminal event: a closed run stores none of them. `terminal` is only for
   * the transition's own closing event. `at` is when an event happened, if it was queued before
   * being written.
   */
  function insertEvents(runId: string, events: readonly (RunEventInput & { at?: number })[], terminal: boolean) {
    const now = clock.now();
    const open = terminal ? eq(runs.id, runId) : and(eq(runs.id, runId), inArray(runs.state, ACTIVE));
    const values = sql.join(
      events.map((e, i) => sql`(${i + 1}, ${e.at ?? now}, ${e.level ?? 'info'}, ${e.type}, ${e.message}, ${e.data ? JSON.stringify(e.data) : null})`),
      sql`, `,
    );
    // Two writers may take the same next seq: the second retries with the new max.
    return retryingSeq(() =>
      db.all<{ seq: number; at: number; level: RunEvent['level']; type: string; message: string; data: string | null }>(sql`
        INSERT INTO run_events (run_id, seq, at, level, type, message, data)
        SELECT ${runId}, (SELECT coalesce(max(seq), 0) FROM run_events WHERE run_id = ${runId}) + v.column1, v.column2, v.column3, v.column4, v.column5, v.column6
        FROM (VALUES ${values}) AS v
        WHERE EXISTS (SELECT 1 FROM runs WHERE ${open})
        RETURNING seq, at, level, type, message, data`),
    );
  }

  async function retryingSeq<T>(write: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await write();
      } catch (err) {
        if (attempt < 3 && isUniqueViolation(err)) continue;
        throw err;
      }
    }
  }

  /** Appends one event unless the run already ended (see insertEvents). Answers undefined when it was refused. */
  async function appendEvent(runId: string, e: RunEventInput, opts: { terminal?: boolean } = {}): Promise<RunEvent | undefined> {
    const [row] = await insertEvents(runId, [e], !!opts.terminal);
    if (!row) return undefined;
    bus.publish(runId);
    return { runId, ...row, seq: Number(row.seq), at: Number(row.at), data: row.data === null ? null : (JSON.parse(row.data) as Record<string, unknown>) };
  }

  /**
   * appendEvent for several events of one run in a single statement: one commit (one WAL sync)
   * for a burst instead of one per event; all are stored or, once the run has ended, none.
   * Answers whether they were stored.
   */
  async function appendEvents(runId: string, events: (RunEventInput & { at?: number })[]): Promise<boolean> {
    if (events.length === 0) return true;
    const stored = (await insertEvents(runId, events, false)).length > 0;
    if (stored) bus.publish(runId);
    return stored;
  }

  function queuedRow(input: EnqueueInput) {
    const lockKey = input.exclusive ? (input.lockKey ?? input.clusterId ?? null) : null;
    if (input.exclusive && !lockKey) throw new Error('an exclusive run needs a cluster or a lock key');
    return {
      id: newId('run'),
      kind: input.kind,
      tenantId: input.tenantId ?? null,
      clusterId: input.clusterId ?? null,
      exclusive: input.exclusive,
      lockKey,
      state: 'queued' as const,
      params: input.params ?? {},
      createdBy: input.createdBy ?? null,
      createdAt: clock.now(),
    };
  }

  const queuedEvent = (input: EnqueueInput) => ({ type: 'queued', message: `${input.kind} run queued` });

  async function get(id: string): Promise<Run | undefined> {
    return (await db.select().from(runs).where(eq(runs.id, id)).get());
  }

  async function activeForLock(lockKey: string): Promise<Run | undefined> {
    return (await db
      .select()
      .from(runs)
      .where(and(eq(runs.lockKey, lockKey), eq(runs.exclusive, true), inArray(runs.state, ACTIVE)))
      .get());
  }

  return {
    get,
    activeForLock,
    /** The active cluster-changing run of a cluster, if any. */
    activeForCluster: (clusterId: string) => activeForLock(clusterId),
    appendEvent,
    appendEvents,

    async enqueue(input: EnqueueInput): Promise<Run> {
      const row = queuedRow(input);
      try {
        const [run] = await db.insert(runs).values(row).returning();
        await appendEvent(row.id, queuedEvent(input));
        bus.wake();
        return run!;
      } catch (err) {
        if (row.lockKey && isUniqueViolation(err)) {
          const active = await activeForLock(row.lockKey);
          throw new ActiveRunConflict(active?.id ?? 'unknown');
        }
        throw err;
      }
    },

    /**
     * enqueue in one db.batch with the caller's statements, which get the new run's id: the run,
     * its `queued` event and the caller's rows all commit or, if any statement fails (the
     * cluster's lock included), none does, so no caller row can name a run that does not exist
     * nor miss one that does. A unique violation while the lock is held is ActiveRunConflict, any
     * other is rethrown: either may come from the caller's rows, which the caller checks first.
     */
    async enqueueWith(input: EnqueueInput, alongside: Alongside): Promise<Run> {
      const row = queuedRow(input);
      // The run is new in this very transaction, so its first event is seq 1: no writer can race it.
      const event = { runId: row.id, seq: 1, at: row.createdAt, level: 'info' as const, ...queuedEvent(input) };
      try {
        const [[run]] = await db.batch([db.insert(runs).values(row).returning(), db.insert(runEvents).values(event), ...alongside(row.id)]);
        // Listeners hear of the run only once it is committed.
        bus.publish(row.id);
        bus.wake();
        return run!;
      } catch (err) {
        const active = row.lockKey && isUniqueViolation(err) ? await activeForLock(row.lockKey) : undefined;
        if (active) throw new ActiveRunConflict(active.id);
        throw err;
      }
    },

    /** Atomically takes the oldest queued run of the given kinds. */
    async claim(opts: { workerId: string; leaseMs: number; kinds: string[] }): Promise<Run | undefined> {
      if (opts.kinds.length === 0) return undefined;
      const now = clock.now();
      const next = db
        .select({ id: runs.id })
        .from(runs)
        .where(and(eq(runs.state, 'queued'), inArray(runs.kind, opts.kinds)))
        .orderBy(asc(runs.createdAt), asc(runs.id))
        .limit(1);
      const [run] = await db
        .update(runs)
        .set({
          state: 'running',
          leaseOwner: opts.workerId,
          leaseExpiresAt: now + opts.leaseMs,
          startedAt: now,
          attempt: sql`${runs.attempt} + 1`,
        })
        .where(and(eq(runs.id, sql`(${next})`), eq(runs.state, 'queued')))
        .returning();
      if (!run) return undefined;
      await appendEvent(run.id, { type: 'started', message: `${run.kind} run started`, data: { worker: opts.workerId } });
      return run;
    },

    /** Extends the lease; answers whether the worker still owns the run and whether cancel was asked. */
    async heartbeat(runId: string, workerId: string, leaseMs: number): Promise<{ owned: boolean; cancelRequested: boolean }> {
      const [row] = await db
        .update(runs)
        .set({ leaseExpiresAt: clock.now() + leaseMs })
        .where(and(eq(runs.id, runId), eq(runs.leaseOwner, workerId), eq(runs.state, 'running')))
        .returning({ cancelRequested: runs.cancelRequested });
      return { owned: !!row, cancelRequested: !!row?.cancelRequested };
    },

    async finish(
      runId: string,
      workerId: string,
      outcome: { state: Exclude<RunState, 'queued' | 'running'>; result?: unknown; error?: string },
    ): Promise<boolean> {
      const [row] = await db
        .update(runs)
        .set({
          state: outcome.state,
          result: outcome.result ?? null,
          error: outcome.error ?? null,
          finishedAt: clock.now(),
          leaseOwner: null,
          leaseExpiresAt: null,
        })
        .where(and(eq(runs.id, runId), eq(runs.leaseOwner, workerId), eq(runs.state, 'running')))
        .returning({ id: runs.id });
      if (!row) return false;
      await appendEvent(runId, {
        level: outcome.state === 'succeeded' ? 'info' : outcome.state === 'canceled' ? 'warn' : 'error',
        type: outcome.state,
        message: outcome.error ? `run ${outcome.state}: ${outcome.error}` : `run ${outcome.state}`,
      }, { terminal: true });
      return true;
    },

    /** Queued runs are canceled at once; a running one is flagged and its worker aborts it. */
    async requestCancel(runId: string): Promise<Run | undefined> {
      const [queued] = await db
        .update(runs)
        .set({ state: 'canceled', finishedAt: clock.now(), cancelRequested: true })
        .where(and(eq(runs.id, runId), eq(runs.state, 'queued')))
        .returning();
      if (queued) {
        await appendEvent(runId, { level: 'warn', type: 'canceled', message: 'run canceled before it started' }, { terminal: true });
        return queued;
      }
      const [running] = await db
        .update(runs)
        .set({ cancelRequested: true })
        .where(and(eq(runs.id, runId), eq(runs.state, 'running'), eq(runs.cancelRequested, false)))
        .returning();
      if (running) {
        await appendEvent(runId, { level: 'warn', type: 'cancel_requested', message: 'cancel requested' });
        // The worker in this process aborts at once; workers elsewhere see the flag within a poll.
        bus.cancel(runId);
      }
      return get(runId);
    },

    /**
     * Runs whose lease ran out end as `interrupted`. The lease owner stays on the row: its worker
     * may only be paused, and clean-up must know whose process to ask about (see onRunsInterrupted).
     */
    async reapExpired(): Promise<string[]> {
      const now = clock.now();
      const expired = await db
        .update(runs)
        .set({ state: 'interrupted', finishedAt: now, error: 'lease expired: the worker stopped without finishing the run' })
        .where(and(eq(runs.state, 'running'), lt(runs.leaseExpiresAt, now)))
        .returning({ id: runs.id });
      for (const { id } of expired) {
        await appendEvent(id, { level: 'error', type: 'interrupted', message: 'run interrupted: its worker stopped (lease expired)' }, { terminal: true });
      }
      return expired.map((r) => r.id);
    },

    /** Which of these running runs have a cancel request (a worker's poll for cancels made elsewhere). */
    async cancelRequestedAmong(runIds: string[]): Promise<string[]> {
      if (runIds.length === 0) return [];
      const rows = await db
        .select({ id: runs.id })
        .from(runs)
        .where(and(inArray(runs.id, runIds), eq(runs.cancelRequested, true)));
      return rows.map((r) => r.id);
    },

    async events(runId: string, afterSeq = 0, limit = 1000): Promise<RunEvent[]> {
      return (await db
        .select()
        .from(runEvents)
        .where(and(eq(runEvents.runId, runId), gt(runEvents.seq, afterSeq)))
        .orderBy(asc(runEvents.seq))
        .limit(limit));
    },

    async lastEventSeq(runId: string): Promise<number> {
      const row = await db
        .select({ last: sql<number | null>`max(${runEvents.seq})` })
        .from(runEvents)
        .where(eq(runEvents.runId, runId))
        .get();
      return Number(row?.last ?? 0);
    },

    async list(filter: { tenantId?: string; clusterId?: string; limit?: number }): Promise<Run[]> {
      const where = and(
        filter.tenantId ? eq(runs.tenantId, filter.tenantId) : undefined,
        filter.clusterId ? eq(runs.clusterId, filter.clusterId) : undefined,
      );
      return (await db
        .select()
        .from(runs)
        .where(where)
        .orderBy(desc(runs.createdAt), desc(runs.id))
        .limit(filter.limit ?? 100));
    },

    async countByState(): Promise<Record<string, number>> {
      const rows = await db
        .select({ state: runs.state, n: sql<number>`count(*)` })
        .from(runs)
        .groupBy(runs.state);
      return Object.fromEntries(rows.map((r) => [r.state, Number(r.n)]));
    },
  };
}
