import { setTimeout as sleep } from 'node:timers/promises';
import type { EmitOptions } from '../lib/jobs/executor.ts';

/** Events per transaction at most, so one burst cannot hold the database's write lock for long. */
const MAX_BATCH = 500;
/** How long deferred events gather before they are written together. */
export const DEFER_WINDOW_MS = 100;
/**
 * The least time from the end of one write to the start of the next. A commit blocks the process
 * for its sync; in a burst of awaited events from many tasks of one run (a cluster push's nodes
 * reaching their apply a millisecond apart) this lets each commit carry several of them, where
 * one commit per event-loop turn carried one. A run that writes less often never waits for it.
 */
export const COMMIT_GAP_MS = 2;

export interface EventWriter<E> {
  /** Resolves once the event is stored (or refused); rejects when its batch could not be written. */
  push(e: E, opts?: EmitOptions): Promise<void>;
  /** Writes what is queued without waiting for a window; resolves once everything pushed so far is written (or failed). */
  idle(): Promise<void>;
}

interface Pending<E> {
  event: E;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Coalesces a run's events. Each write is a commit, and a commit's sync blocks the process (the
 * embedded database is synchronous), so a busy tofu stream written line by line stalls the very
 * state backend tofu is waiting on. Events queue up while a batch is being written and go
 * together; deferred ones (`{ defer: true }`, for high-volume streams nobody awaits) also wait up
 * to DEFER_WINDOW_MS for company. An event that is not deferred is written at once (at most
 * COMMIT_GAP_MS after the previous write), together with everything queued before it, so order is
 * kept and an awaited emit is never held back for long.
 * `write` answers false when the run was closed elsewhere; `onRefused` is told.
 */
export function createEventWriter<E>(
  write: (events: E[]) => Promise<boolean>,
  onRefused: () => void,
  opts: { windowMs?: number; gapMs?: number } = {},
): EventWriter<E> {
  const windowMs = opts.windowMs ?? DEFER_WINDOW_MS;
  const gapMs = opts.gapMs ?? COMMIT_GAP_MS;
  let queue: Pending<E>[] = [];
  let urgent = false;
  let draining: Promise<void> | undefined;
  let kick: (() => void) | undefined;
  let lastWriteEnd = -Infinity;

  const window = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, windowMs);
      kick = done;
      function done() {
        clearTimeout(timer);
        kick = undefined;
        resolve();
      }
    });

  // Timers start from the event loop's cached time, which a busy turn leaves behind: a timer can
  // fire early by that much, so the wait is checked against the real clock.
  async function gap(): Promise<void> {
    let left: number;
    while ((left = lastWriteEnd + gapMs - performance.now()) > 0) await sleep(left);
  }

  // Clears `draining` itself, synchronously with finding the queue empty: a push that comes after
  // that starts a new drain instead of waiting for one that has already ended.
  async function drain(): Promise<void> {
    for (;;) {
      if (queue.length === 0) {
        draining = undefined;
        return;
      }
      // An urgent event still waits for the rest of this event-loop turn: when many tasks of one
      // run are busy (a cluster push), the events their I/O callbacks emit together share a commit.
      if (!urgent) await window();
      await gap();
      await new Promise<void>((resolve) => setImmediate(resolve));
      urgent = false;
      const batch = queue.slice(0, MAX_BATCH);
      queue = queue.slice(batch.length);
      try {
        if (!(await write(batch.map((p) => p.event)))) onRefused();
        for (const p of batch) p.resolve();
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
      lastWriteEnd = performance.now();
    }
  }

  const hurry = () => {
    urgent = true;
    kick?.();
  };

  return {
    push(event, o) {
      const done = new Promise<void>((resolve, reject) => queue.push({ event, resolve, reject }));
      if (!o?.defer) hurry();
      draining ??= drain();
      return done;
    },
    async idle() {
      while (draining) {
        if (queue.length > 0) hurry();
        await draining;
      }
    },
  };
}
