import type { RunEventInput } from '../lib/jobs/types.ts';

/** Events per transaction at most, so one burst cannot hold the database's write lock for long. */
const MAX_BATCH = 500;

export interface EventWriter {
  /** Resolves once the event is stored (or refused); rejects when its batch could not be written. */
  push(e: RunEventInput): Promise<void>;
  /** Resolves once every event pushed so far has been written (or has failed). */
  idle(): Promise<void>;
}

interface Pending {
  event: RunEventInput;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Coalesces a run's events: while one batch is being written, the next ones queue up and go to
 * the database together. A busy tofu stream (several lines per resource) then costs one commit
 * per burst instead of one per line, and the events still land in the order they were emitted.
 * `write` answers false when the run was closed elsewhere; `onRefused` is told once.
 */
export function createEventWriter(write: (events: RunEventInput[]) => Promise<boolean>, onRefused: () => void): EventWriter {
  let queue: Pending[] = [];
  let flushing: Promise<void> | undefined;

  // Clears `flushing` itself, synchronously with finding the queue empty: a push that comes after
  // that starts a new flush instead of waiting for one that has already ended.
  async function flush(): Promise<void> {
    for (;;) {
      if (queue.length === 0) {
        flushing = undefined;
        return;
      }
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

  return {
    push(event) {
      const done = new Promise<void>((resolve, reject) => queue.push({ event, resolve, reject }));
      flushing ??= flush();
      return done;
    },
    async idle() {
      while (flushing) await flushing;
    },
  };
}
