import { createServer, type Server } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { batchEvents } from '../lib/jobs/event-batch.ts';
import { createWorker } from '../runner/worker.ts';
import { portAccepts, untilPortReturns } from '../runner/jobs/node-port.ts';
import { createHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => h.close());

describe('run events in one statement', () => {
  it('appends many events with consecutive numbers after the existing ones, in order', async () => {
    const run = await h.deps.jobs.enqueue({ kind: 'x', exclusive: false });
    const stored = await h.deps.jobs.appendEvents(run.id, [
      { type: 'a', message: 'first', data: { n: 1 } },
      { level: 'warn', type: 'b', message: 'second' },
      { type: 'c', message: 'third' },
    ]);
    expect(stored?.map((e) => [e.seq, e.type, e.level])).toEqual([
      [2, 'a', 'info'],
      [3, 'b', 'warn'],
      [4, 'c', 'info'],
    ]);
    const all = await h.deps.jobs.events(run.id);
    expect(all.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(all[1]?.data).toEqual({ n: 1 });
    expect(all[2]?.data).toBeNull();
  });

  it('refuses the whole batch once the run has ended', async () => {
    const run = await h.deps.jobs.enqueue({ kind: 'x', exclusive: false });
    await h.deps.jobs.requestCancel(run.id);
    const before = (await h.deps.jobs.events(run.id)).length;
    expect(await h.deps.jobs.appendEvents(run.id, [{ type: 'late', message: 'too late' }])).toBeUndefined();
    expect(await h.deps.jobs.events(run.id)).toHaveLength(before);
  });

  it('groups the events of one turn into one write and answers each caller', async () => {
    const writes: string[][] = [];
    const b = batchEvents(async (es) => {
      writes.push(es.map((e) => e.message));
      return !es.some((e) => e.message === 'refused');
    });
    const first = await Promise.all(['a', 'b', 'c'].map((message) => b.append({ type: 't', message })));
    expect(first).toEqual([true, true, true]);
    expect(writes).toEqual([['a', 'b', 'c']]);
    await expect(b.append({ type: 't', message: 'refused' })).resolves.toBe(false);
    expect(writes).toHaveLength(2);
    await b.idle();
  });

  it('rejects every caller of a write that failed, and keeps working afterwards', async () => {
    let fail = true;
    const b = batchEvents(async () => {
      if (fail) throw new Error('disk full');
      return true;
    });
    const results = await Promise.allSettled([b.append({ type: 't', message: '1' }), b.append({ type: 't', message: '2' })]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    await expect(b.append({ type: 't', message: '3' })).resolves.toBe(true);
  });

  it("a worker stores concurrent emits of one run with gapless numbers, all before the run's end", async () => {
    const worker = createWorker({
      deps: h.deps,
      executors: {
        fan: async ({ emit }) => {
          await Promise.all(Array.from({ length: 30 }, (_, i) => emit({ type: 'fan.step', message: `step ${i}` })));
          return { ok: true };
        },
      },
      workerId: 'w',
      leaseMs: 10_000,
      concurrency: 1,
      pollMs: 10,
    });
    const run = await h.deps.jobs.enqueue({ kind: 'fan', exclusive: false });
    worker.start();
    try {
      for (let i = 0; i < 500; i++) {
        const r = await h.deps.jobs.get(run.id);
        if (r && r.state !== 'queued' && r.state !== 'running') break;
        await new Promise((res) => setTimeout(res, 10));
      }
    } finally {
      await worker.stop(1_000);
    }
    expect((await h.deps.jobs.get(run.id))?.state).toBe('succeeded');
    const events = await h.deps.jobs.events(run.id);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const steps = events.filter((e) => e.type === 'fan.step');
    expect(steps.map((e) => e.message)).toEqual(Array.from({ length: 30 }, (_, i) => `step ${i}`));
    // The closing event comes after every step.
    expect(events.at(-1)!.seq).toBeGreaterThan(steps.at(-1)!.seq);
  });
});

describe('node port checks', () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = undefined;
  });
  const listen = (port = 0): Promise<number> =>
    new Promise((resolve, reject) => {
      server = createServer((s) => s.destroy());
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server!.address() as { port: number }).port));
    });

  it('tells an open port from a closed one', async () => {
    const port = await listen();
    expect(await portAccepts(`127.0.0.1:${port}`, 1_000)).toBe(true);
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    expect(await portAccepts(`127.0.0.1:${port}`, 1_000)).toBe(false);
  });

  it('returns as soon as a port seen closed reopens, well before the longest wait', async () => {
    const port = await listen();
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    const seen = { down: false };
    const reopen = setTimeout(() => void listen(port), 150);
    // The longest wait is far beyond the test's timeout: only an early return passes.
    await untilPortReturns(`127.0.0.1:${port}`, 60_000, seen, new AbortController().signal);
    clearTimeout(reopen);
    expect(seen.down).toBe(true);
    expect(await portAccepts(`127.0.0.1:${port}`, 1_000)).toBe(true);
  });

  it('does not take a port that never went down for a node that came back', async () => {
    const port = await listen();
    const seen = { down: false };
    await untilPortReturns(`127.0.0.1:${port}`, 120, seen, new AbortController().signal);
    expect(seen.down).toBe(false);
  });

  it('stops waiting when the run is stopped', async () => {
    const port = await listen();
    const c = new AbortController();
    setTimeout(() => c.abort(new Error('stopped')), 50);
    await expect(untilPortReturns(`127.0.0.1:${port}`, 60_000, { down: false }, c.signal)).rejects.toThrow('stopped');
  });
});
