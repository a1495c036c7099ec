import { describe, expect, it } from 'vitest';
import { createLimiter } from '../runner/jobs/collect/limit.ts';

/** A task the test finishes by hand. */
function gate(): { task: () => Promise<void>; open: () => void; started: boolean } {
  let open!: () => void;
  const g = {
    started: false,
    open: () => open(),
    task: () => {
      g.started = true;
      return new Promise<void>((r) => (open = r));
    },
  };
  return g;
}

const settled = async (p: Promise<unknown>): Promise<boolean> => {
  let done = false;
  void p.then(() => (done = true));
  // Enough turns for a chain of awaits to run.
  for (let i = 0; i < 10; i++) await Promise.resolve();
  return done;
};

describe('collect limiter', () => {
  it('runs at most `concurrency` tasks, in the order handed in', async () => {
    const limit = createLimiter(2);
    const gates = [gate(), gate(), gate()];
    const runs = gates.map((g) => limit(g.task));
    await settled(Promise.resolve());
    expect(gates.map((g) => g.started)).toEqual([true, true, false]);
    gates[1]!.open();
    await runs[1];
    await settled(Promise.resolve());
    expect(gates[2]!.started).toBe(true);
    gates[0]!.open();
    gates[2]!.open();
    await Promise.all(runs);
  });

  it('started() settles once every task handed in so far has a slot, not when they finish', async () => {
    const limit = createLimiter(1);
    expect(await settled(limit.started())).toBe(true);

    const [a, b, c] = [gate(), gate(), gate()];
    const runs = [limit(a.task), limit(b.task)];
    const allStarted = limit.started();
    expect(await settled(allStarted)).toBe(false);
    // Handed in while the wait is pending, c is waited for too: the queue must drain.
    runs.push(limit(c.task));
    a.open();
    await runs[0];
    // b has its slot, c still waits: the wait is over only once nothing waits.
    expect(b.started).toBe(true);
    expect(await settled(allStarted)).toBe(false);
    b.open();
    await runs[1];
    expect(c.started).toBe(true);
    expect(await settled(allStarted)).toBe(true);
    // c is still running: started() does not wait for it to finish.
    expect(await settled(limit.started())).toBe(true);
    c.open();
    await Promise.all(runs);
  });
});
