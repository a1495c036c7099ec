import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../db/client.ts';
import { createRunBus } from '../lib/jobs/bus.ts';
import { ActiveRunConflict, createJobs } from '../lib/jobs/queue.ts';
import { createHarness, manualClock, type Harness } from './support/harness.ts';

let h: Harness;
const clock = manualClock();
beforeEach(async () => {
  h = await createHarness({ clock });
});
afterEach(async () => h.close());

describe('run queue', () => {
  it('admits one active cluster-changing run per cluster and names the active one', async () => {
    const first = await h.deps.jobs.enqueue({ kind: 'x', clusterId: 'cl_a', exclusive: true });
    await expect(h.deps.jobs.enqueue({ kind: 'x', clusterId: 'cl_a', exclusive: true })).rejects.toThrow(ActiveRunConflict);
    const err = await h.deps.jobs.enqueue({ kind: 'x', clusterId: 'cl_a', exclusive: true }).catch((e) => e);
    expect(err.activeRunId).toBe(first.id);
    // Read-only runs and other clusters are not blocked.
    await h.deps.jobs.enqueue({ kind: 'x', clusterId: 'cl_a', exclusive: false });
    await h.deps.jobs.enqueue({ kind: 'x', clusterId: 'cl_b', exclusive: true });
    // Once the first ends, the slot is free again.
    await h.deps.jobs.requestCancel(first.id);
    await h.deps.jobs.enqueue({ kind: 'x', clusterId: 'cl_a', exclusive: true });
  });

  it('hands each run to exactly one of two workers on separate connections', async () => {
    const other = await openDatabase({ url: `file:${h.dbFile}` });
    const jobsB = createJobs({ db: other.db, clock, bus: createRunBus() });
    try {
      const ids = new Set<string>();
      for (let i = 0; i < 20; i++) ids.add((await h.deps.jobs.enqueue({ kind: 'x', exclusive: false })).id);
      const claimed: string[] = [];
      const drain = async (jobs: typeof jobsB, worker: string) => {
        for (;;) {
          const run = await jobs.claim({ workerId: worker, leaseMs: 10_000, kinds: ['x'] });
          if (!run) return;
          claimed.push(run.id);
        }
      };
      await Promise.all([drain(h.deps.jobs, 'a'), drain(jobsB, 'b'), drain(h.deps.jobs, 'a2'), drain(jobsB, 'b2')]);
      expect(claimed.sort()).toEqual([...ids].sort());
    } finally {
      other.close();
    }
  });

  it('claims only kinds it can execute, oldest first', async () => {
    const a = await h.deps.jobs.enqueue({ kind: 'a', exclusive: false });
    clock.advance(1);
    await h.deps.jobs.enqueue({ kind: 'b', exclusive: false });
    clock.advance(1);
    const a2 = await h.deps.jobs.enqueue({ kind: 'a', exclusive: false });
    expect((await h.deps.jobs.claim({ workerId: 'w', leaseMs: 1000, kinds: ['a'] }))?.id).toBe(a.id);
    expect((await h.deps.jobs.claim({ workerId: 'w', leaseMs: 1000, kinds: ['a'] }))?.id).toBe(a2.id);
    expect(await h.deps.jobs.claim({ workerId: 'w', leaseMs: 1000, kinds: ['a'] })).toBeUndefined();
  });

  it('marks a run whose lease expired as interrupted, and the late worker cannot finish it', async () => {
    const run = await h.deps.jobs.enqueue({ kind: 'x', clusterId: 'cl_a', exclusive: true });
    await h.deps.jobs.claim({ workerId: 'w', leaseMs: 1000, kinds: ['x'] });
    clock.advance(500);
    expect((await h.deps.jobs.heartbeat(run.id, 'w', 1000)).owned).toBe(true);
    clock.advance(900);
    expect(await h.deps.jobs.reapExpired()).toEqual([]);
    clock.advance(200);
    expect(await h.deps.jobs.reapExpired()).toEqual([run.id]);
    const after = await h.deps.jobs.get(run.id);
    expect(after?.state).toBe('interrupted');
    expect(await h.deps.jobs.finish(run.id, 'w', { state: 'succeeded' })).toBe(false);
    expect((await h.deps.jobs.heartbeat(run.id, 'w', 1000)).owned).toBe(false);
    const events = await h.deps.jobs.events(run.id);
    expect(events.map((e) => e.type)).toEqual(['queued', 'started', 'interrupted']);
    // The cluster is free for a new run.
    await h.deps.jobs.enqueue({ kind: 'x', clusterId: 'cl_a', exclusive: true });
  });

  it('cancels a queued run at once and flags a running one', async () => {
    const queued = await h.deps.jobs.enqueue({ kind: 'x', exclusive: false });
    expect((await h.deps.jobs.requestCancel(queued.id))?.state).toBe('canceled');
    const running = await h.deps.jobs.enqueue({ kind: 'x', exclusive: false });
    await h.deps.jobs.claim({ workerId: 'w', leaseMs: 1000, kinds: ['x'] });
    expect((await h.deps.jobs.requestCancel(running.id))?.state).toBe('running');
    expect(await h.deps.jobs.heartbeat(running.id, 'w', 1000)).toEqual({ owned: true, cancelRequested: true });
  });

  it('numbers events per run without gaps under concurrent appends', async () => {
    const run = await h.deps.jobs.enqueue({ kind: 'x', exclusive: false });
    await Promise.all(Array.from({ length: 25 }, (_, i) => h.deps.jobs.appendEvent(run.id, { type: 'step', message: `s${i}` })));
    const seqs = (await h.deps.jobs.events(run.id)).map((e) => e.seq);
    expect(seqs).toEqual(Array.from({ length: 26 }, (_, i) => i + 1));
  });
});
