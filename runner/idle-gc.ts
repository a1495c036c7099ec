// A run (a collect pass above all) leaves V8's heap grown to its peak and full of garbage; V8's own
// memory reducer gives that memory back only several seconds into idleness, so a runner between
// passes sat at its peak footprint. Here, once the last running executor has ended and nothing
// started for a moment, one memory-reducing full GC returns it at once. Cheaper than making V8
// collect more often during runs (--heap-growing-percent=20 cost a 500-node pass ~65% more CPU);
// the price is one pause of the event loop while idle: tens of ms after the bench's 30-node
// passes, ~0.2-0.3 s with ~50 MB live and a few hundred MB of garbage (the "last-resort" GC is
// the one that hands pages back; a regular major GC left RSS where it was).
import v8 from 'node:v8';
import vm from 'node:vm';
import type { ExecutorRegistry } from '../lib/jobs/executor.ts';

type Gc = (opts: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/** V8's gc(), without exposing it to every module as --expose-gc would. */
function v8Gc(): Gc | undefined {
  try {
    v8.setFlagsFromString('--expose-gc');
    return vm.runInNewContext('gc') as Gc;
  } catch {
    return undefined;
  }
}

export interface IdleGc {
  wrap<D>(executors: ExecutorRegistry<D>): ExecutorRegistry<D>;
  stop(): void;
}

/**
 * `delayMs` after the last of the wrapped executors ends (none started meanwhile), one full GC
 * that gives V8's free pages back to the system. `gc` is injectable for tests.
 */
export function idleGc(opts: { delayMs: number; gc?: () => void; onError: (err: unknown) => void }): IdleGc {
  let collect = opts.gc;
  let running = 0;
  let timer: NodeJS.Timeout | undefined;
  const later = () => {
    timer = setTimeout(() => {
      timer = undefined;
      if (running > 0) return;
      try {
        if (!collect) {
          const gc = v8Gc();
          collect = gc ? () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' }) : () => {};
        }
        collect();
      } catch (err) {
        opts.onError(err);
      }
    }, opts.delayMs);
    timer.unref();
  };
  return {
    wrap(executors) {
      return Object.fromEntries(
        Object.entries(executors).map(([kind, execute]) => [
          kind,
          async (ctx) => {
            running++;
            clearTimeout(timer);
            try {
              return await execute(ctx);
            } finally {
              if (--running === 0) later();
            }
          },
        ]),
      );
    },
    stop() {
      clearTimeout(timer);
    },
  };
}
