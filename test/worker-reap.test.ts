import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../runner/worker.ts';
import { createHarness, type Harness } from './support/harness.ts';

let h: Harness;
let worker: Worker | undefined;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => {
  await worker?.stop(0);
  worker = undefined;
  await h.close();
});

describe('worker reaping', () => {
  it("ends a dead worker's run interrupted once its lease ran out, though it looks only every lease / 10", async () => {
    const run = await h.deps.jobs.enqueue({ kind: 'ghost-kind', clusterId: 'cl_a', exclusive: true });
    // Another worker took it and died: its lease is never renewed.
    expect(await h.deps.jobs.claim({ workerId: 'ghost', leaseMs: 300, kinds: ['ghost-kind'] })).toMatchObject({ id: run.id });
    const interrupted: string[][] = [];
    let reaps = 0;
    const jobs = h.deps.jobs;
    const reapExpired = jobs.reapExpired.bind(jobs);
    jobs.reapExpired = () => {
      reaps++;
      return reapExpired();
    };
    worker = createWorker({
      deps: h.deps,
      executors: {},
      workerId: 'alive',
      leaseMs: 2_000,
      concurrency: 1,
      pollMs: 5,
      onInterrupted: async (ids) => void interrupted.push(ids),
    });
    worker.start();
    await expect.poll(async () => (await h.deps.jobs.get(run.id))?.state, { timeout: 10_000, interval: 50 }).toBe('interrupted');
    expect(interrupted).toEqual([[run.id]]);
    expect(reaps).toBeGreaterThan(0);
  });
});
