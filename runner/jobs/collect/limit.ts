export interface Limiter {
  <T>(task: () => Promise<T>): Promise<T>;
  /**
   * Settles once every task handed in so far has started (none waits for a slot), at once if
   * none does. Tasks handed in later do not delay a settled wait.
   */
  started(): Promise<void>;
}

/** Runs at most `concurrency` tasks at once, in the order they were handed in. */
export function createLimiter(concurrency: number): Limiter {
  const max = Math.max(1, Math.floor(concurrency));
  let active = 0;
  const waiting: (() => void)[] = [];
  let drained: { promise: Promise<void>; resolve: () => void } | undefined;
  // A finishing task hands its slot straight to the next waiter, so a newcomer cannot slip in between.
  const release = (): void => {
    const next = waiting.shift();
    if (next) next();
    else active--;
    if (waiting.length === 0 && drained) {
      drained.resolve();
      drained = undefined;
    }
  };
  const run = async <T>(task: () => Promise<T>): Promise<T> => {
    if (active >= max) await new Promise<void>((resolve) => waiting.push(resolve));
    else active++;
    try {
      return await task();
    } finally {
      release();
    }
  };
  return Object.assign(run, {
    started: (): Promise<void> => {
      if (waiting.length === 0) return Promise.resolve();
      if (!drained) {
        let resolve!: () => void;
        const promise = new Promise<void>((r) => (resolve = r));
        drained = { promise, resolve };
      }
      return drained.promise;
    },
  });
}
