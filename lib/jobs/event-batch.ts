import type { RunEventInput } from './types.ts';

/** Bounds one statement's size (five bound values per event). */
const MAX_BATCH = 400;

export interface EventBatcher {
  /** Resolves once the event is stored (true) or was refused because the run ended (false). */
  append(e: RunEventInput): Promise<boolean>;
  /** Resolves when every event handed to append so far has been written or refused. */
  idle(): Promise<void>;
}

/**
 * Group commit for one run's events: every event emitted in the same turn of the event loop
 * (a cluster push's many nodes answer together) goes to the database in one write, so fifty
 * concurrent nodes cost a few commits instead of hundreds. Each caller still waits for its
 * own event to be stored, and events keep the order in which they were appended.
 */
export function batchEvents(write: (events: RunEventInput[]) => Promise<boolean>): EventBatcher {
  let queue: Array<{ e: RunEventInput; resolve: (ok: boolean) => void; reject: (err: unknown) => void }> = [];
  let running: Promise<void> | undefined;

  const drain = async (): Promise<void> => {
    // One hop lets the rest of this turn's emits join the batch.
    await new Promise<void>((r) => setImmediate(r));
    while (queue.length) {
      const batch = queue.slice(0, MAX_BATCH);
      queue = queue.slice(batch.length);
      try {
        const ok = await write(batch.map((b) => b.e));
        for (const b of batch) b.resolve(ok);
      } catch (err) {
        for (const b of batch) b.reject(err);
      }
    }
    running = undefined;
  };

  return {
    append(e) {
      return new Promise<boolean>((resolve, reject) => {
        queue.push({ e, resolve, reject });
        running ??= drain();
      });
    },
    idle: () => running ?? Promise.resolve(),
  };
}
