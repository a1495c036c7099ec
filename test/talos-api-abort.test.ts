import { afterEach, describe, expect, it } from 'vitest';
import { TalosApiError } from '../lib/talos/api/index.ts';
import { whenAborted } from '../lib/talos/api/abort-fanout.ts';
import { configuredNode, expectRejection } from './talos-api-helpers.ts';

const cleanup: (() => unknown)[] = [];
const warnings: Error[] = [];
const onWarning = (w: Error) => warnings.push(w);
afterEach(async () => {
  process.off('warning', onWarning);
  warnings.length = 0;
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

// Node emits the warning event on the next tick; give it a few turns before looking.
const settle = () => new Promise((r) => setTimeout(r, 20));

describe('one abort signal shared by many calls', () => {
  it('cancels every call in flight, without a MaxListenersExceededWarning', async () => {
    const { sim, client } = await configuredNode();
    cleanup.push(() => sim.stop(), () => client.close());
    sim.setLatency(5_000);
    process.on('warning', onWarning);
    const ac = new AbortController();
    // Unary and streaming calls, more than the ten listeners Node tolerates on one target.
    const calls = [
      ...Array.from({ length: 20 }, () => client.systemStat({ signal: ac.signal })),
      ...Array.from({ length: 5 }, () => client.imagePull({ image: 'ghcr.io/siderolabs/installer:v1.13.9' }, { signal: ac.signal })),
    ];
    await settle();
    ac.abort();
    const errors = await Promise.all(calls.map((c) => expectRejection(c)));
    for (const e of errors) {
      expect(e).toBeInstanceOf(TalosApiError);
      expect((e as TalosApiError).code).toBe('canceled');
    }
    await settle();
    expect(warnings.map((w) => w.name)).not.toContain('MaxListenersExceededWarning');
  });

  it('forgets a call once it ended: a later abort does not reach it', () => {
    const ac = new AbortController();
    const seen: string[] = [];
    const doneA = whenAborted(ac.signal, () => seen.push('a'));
    whenAborted(ac.signal, () => seen.push('b'));
    doneA();
    ac.abort();
    expect(seen).toEqual(['b']);
    expect(whenAborted(undefined, () => seen.push('c'))).toBeTypeOf('function');
  });
});
