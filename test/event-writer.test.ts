import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEventWriter } from '../runner/event-writer.ts';
import { createWorker } from '../runner/worker.ts';
import { createHarness, type Harness } from './support/harness.ts';

type E = { n: number };

function recorder(answer: () => boolean | Promise<boolean> = () => true) {
  const batches: number[][] = [];
  const write = async (events: E[]) => {
    batches.push(events.map((e) => e.n));
    return answer();
  };
  return { batches, write };
}

describe('run event writer', () => {
  it('writes deferred events together and in order; idle() writes them without waiting out the window', async () => {
    const r = recorder();
    // A window far longer than the test may take: only idle() can have written them.
    const w = createEventWriter<E>(r.write, () => undefined, { windowMs: 600_000 });
    const stored = Array.from({ length: 50 }, (_, n) => w.push({ n }, { defer: true }));
    await w.idle();
    await Promise.all(stored);
    expect(r.batches).toEqual([Array.from({ length: 50 }, (_, n) => n)]);
  });

  it('writes an awaited event at once, with every deferred one queued before it', async () => {
    const r = recorder();
    const w = createEventWriter<E>(r.write, () => undefined, { windowMs: 600_000 });
    void w.push({ n: 1 }, { defer: true });
    void w.push({ n: 2 }, { defer: true });
    await w.push({ n: 3 });
    expect(r.batches).toEqual([[1, 2, 3]]);
    // Events pushed while a batch is being written go in the next one, still in order.
    const a = w.push({ n: 4 });
    const b = w.push({ n: 5 }, { defer: true });
    const c = w.push({ n: 6 });
    await Promise.all([a, b, c]);
    expect(r.batches.flat()).toEqual([1, 2, 3, 4, 5, 6]);
    expect(r.batches.length).toBeLessThan(6);
  });

  it('lets awaited events from separate callbacks of one event-loop turn share one write', async () => {
    const r = recorder();
    const w = createEventWriter<E>(r.write, () => undefined, { windowMs: 600_000 });
    // Three tasks of one run woken in the same turn (as a cluster push's I/O callbacks are).
    const stored = await new Promise<Promise<void>[]>((resolve) => {
      const out: Promise<void>[] = [];
      for (const n of [1, 2, 3]) setImmediate(() => {
        out.push(w.push({ n }));
        if (out.length === 3) resolve(out);
      });
    });
    await Promise.all(stored);
    expect(r.batches).toEqual([[1, 2, 3]]);
  });

  it('holds an awaited event that follows a write closely until the gap has passed, so later ones of other tasks share its write', async () => {
    // One task's event right after a write, another task's some milliseconds later (a cluster
    // push's nodes reaching their apply one after the other); the gap is wide so only a stall of
    // the whole test could split them.
    const burst = async (gapMs: number) => {
      const r = recorder();
      const w = createEventWriter<E>(r.write, () => undefined, { windowMs: 600_000, gapMs });
      await w.push({ n: 1 });
      const b = w.push({ n: 2 });
      await new Promise((resolve) => setTimeout(resolve, 20));
      await Promise.all([b, w.push({ n: 3 })]);
      return r.batches;
    };
    expect(await burst(300)).toEqual([[1], [2, 3]]);
    // Without a gap each goes in its own write: the gap is what groups them.
    expect(await burst(0)).toEqual([[1], [2], [3]]);
  });

  it('tells a refusal, and rejects the events of a batch that failed without losing later ones', async () => {
    let refused = 0;
    let fail = true;
    const r = recorder(() => {
      if (fail) {
        fail = false;
        throw new Error('disk full');
      }
      return false;
    });
    const w = createEventWriter<E>(r.write, () => refused++);
    await expect(w.push({ n: 1 })).rejects.toThrow('disk full');
    await w.push({ n: 2 });
    expect(refused).toBe(1);
    expect(r.batches).toEqual([[1], [2]]);
  });

  it('starts a new write for an event pushed right after the queue ran dry', async () => {
    const r = recorder();
    const w = createEventWriter<E>(r.write, () => undefined);
    for (let n = 0; n < 20; n++) await w.push({ n });
    await w.idle();
    expect(r.batches.flat()).toEqual(Array.from({ length: 20 }, (_, n) => n));
  });
});

describe('jobs.appendEvents', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await createHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  it('stores a batch in order with its own timestamps, and nothing once the run has ended', async () => {
    const run = await h.deps.jobs.enqueue({ kind: 'test.noop', exclusive: false });
    const claimed = await h.deps.jobs.claim({ workerId: 'w', leaseMs: 10_000, kinds: ['test.noop'] });
    expect(claimed?.id).toBe(run.id);
    const before = (await h.deps.jobs.events(run.id)).length;
    expect(await h.deps.jobs.appendEvents(run.id, [
      { type: 'a', message: 'first', at: 1000 },
      { type: 'b', message: 'second', data: { k: 1 }, at: 2000 },
      { type: 'c', message: 'third' },
    ])).toBe(true);
    const stored = (await h.deps.jobs.events(run.id)).slice(before);
    expect(stored.map((e) => [e.type, e.message])).toEqual([['a', 'first'], ['b', 'second'], ['c', 'third']]);
    expect(stored.map((e) => e.seq)).toEqual([before + 1, before + 2, before + 3]);
    expect(stored.slice(0, 2).map((e) => e.at)).toEqual([1000, 2000]);
    expect(stored[1]!.data).toEqual({ k: 1 });

    await h.deps.jobs.finish(run.id, 'w', { state: 'succeeded' });
    const closed = (await h.deps.jobs.events(run.id)).length;
    expect(await h.deps.jobs.appendEvents(run.id, [{ type: 'late', message: 'after the end' }])).toBe(false);
    expect(await h.deps.jobs.events(run.id)).toHaveLength(closed);
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
