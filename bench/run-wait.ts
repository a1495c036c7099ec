import type { Harness } from '../test/support/harness.ts';

/**
 * Waits for a run's end, woken by its own events (the last one is written when it ends) and at
 * most every 250 ms otherwise, reading the run at most once per 10 ms: a bench that polled the
 * run every few milliseconds would itself load the database the run uses, and count as its CPU.
 */
export async function runFinished(h: Harness, runId: string): Promise<{ state: string; error: string | null }> {
  let published = 0;
  let wake: () => void = () => {};
  const off = h.deps.bus.subscribe(runId, () => {
    published++;
    wake();
  });
  try {
    for (;;) {
      const seen = published;
      const run = await h.deps.jobs.get(runId);
      if (!run) throw new Error(`run ${runId} is gone`);
      if (run.state !== 'queued' && run.state !== 'running') return { state: run.state, error: run.error ?? null };
      await new Promise((r) => setTimeout(r, 10));
      if (published !== seen) continue;
      await new Promise<void>((r) => {
        const t = setTimeout(r, 250);
        wake = () => {
          clearTimeout(t);
          r();
        };
      });
    }
  } finally {
    off();
  }
}
