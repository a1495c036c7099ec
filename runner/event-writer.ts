import type { EmitOptions } from '../lib/jobs/executor.ts';

/** Events per transaction at most, so one burst cannot hold the database's write lock for long. */
const MAX_BATCH = 500;
/** How long deferred events gather before they are written together. */
export const DEFER_WINDOW_MS = 100;

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
 * to DEFER_WINDOW_MS for company. An event that is not deferred is written at once, together with
 * everything queued before it, so order is kept and an awaited emit is never held back.
 * `write` answers false when the run was closed elsewhere; `onRefused` is told.
 */
export function createEventWriter<E>(
  write: (events: E[]) => Promise<boolean>,
  onRefused: () => void,
  opts: { windowMs?: number } = {},
): EventWriter<E> {
  const windowMs = opts.windowMs ?? DEFER_WINDOW_MS;
  let queue: Pending<E>[] = [];
  let urgent = false;
  let draining: Promise<void> | undefined;
  let kick: (() => void) | undefined;

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
      else await new Promise<void>((resolve) => setImmediate(resolve));
      urgent = false;
      const batch = queue.slice(0, MAX_BATCH);
      queue = queue.slice(batch.length);
      try {
        if (!(await write(batch.map((p) => p.event)))) onRefused();
        for (const p of batch) p.resolve();
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
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
