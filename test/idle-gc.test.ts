// runner/idle-gc.ts: one memory-reducing GC once the runs have ended, none while a run is going
// or when the next run follows within the delay.
import { describe, expect, it } from 'vitest';
import type { RunContext } from '../lib/jobs/executor.ts';
import { idleGc } from '../runner/idle-gc.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An executor that runs until its `finish` is called. */
function held() {
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  return { finish, execute: async () => done };
}

describe('idleGc', () => {
  it('collects once after the last of overlapping runs ends, and not when the next run starts within the delay', async () => {
    let gcs = 0;
    const idle = idleGc({ delayMs: 40, gc: () => gcs++, onError: (err) => expect.fail(String(err)) });
    const a = held();
    const b = held();
    const wrapped = idle.wrap<unknown>({ a: a.execute, b: b.execute, quick: async () => 'ok' });
    const ctx = {} as RunContext<unknown>;
    const runA = wrapped.a!(ctx);
    const runB = wrapped.b!(ctx);
    a.finish();
    await runA;
    await sleep(80);
    expect(gcs).toBe(0);
    b.finish();
    await runB;
    // The next run starts within the delay: no GC between the two.
    await sleep(10);
    expect(await wrapped.quick!(ctx)).toBe('ok');
    await sleep(20);
    expect(gcs).toBe(0);
    for (let i = 0; i < 50 && gcs === 0; i++) await sleep(10);
    expect(gcs).toBe(1);
    await sleep(80);
    expect(gcs).toBe(1);
    idle.stop();
  });

  it('passes a failed run through, and a failing GC is reported, not thrown', async () => {
    const errors: unknown[] = [];
    const idle = idleGc({
      delayMs: 5,
      gc: () => {
        throw new Error('no gc');
      },
      onError: (err) => errors.push(err),
    });
    const wrapped = idle.wrap<unknown>({
      bad: async () => {
        throw new Error('run failed');
      },
    });
    await expect(wrapped.bad!({} as RunContext<unknown>)).rejects.toThrow('run failed');
    for (let i = 0; i < 50 && errors.length === 0; i++) await sleep(10);
    expect(String(errors[0])).toContain('no gc');
    idle.stop();
  });

  it('really collects with V8 when no gc is given', async () => {
    const idle = idleGc({ delayMs: 1, onError: (err) => expect.fail(String(err)) });
    let garbage: unknown[] | undefined = Array.from({ length: 200_000 }, (_, i) => ({ i }));
    const wrapped = idle.wrap<unknown>({ run: async () => (garbage = undefined) });
    const before = process.memoryUsage().heapUsed;
    await wrapped.run!({} as RunContext<unknown>);
    await sleep(50);
    expect(garbage).toBeUndefined();
    expect(process.memoryUsage().heapUsed).toBeLessThan(before);
    idle.stop();
  });
});
