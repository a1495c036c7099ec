import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './support/harness.ts';

// A run's log read after the fact, longer than one database read (1,000 events): the stream and
// the JSON pages must both reach its end, where the terminal event carries the error.

let h: Harness;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => {
  await h.close();
});

const SEEDED = 2_500;

/** A failed run with SEEDED events between `started` and `failed`, written in a few commits. */
async function failedRunWithLongLog(): Promise<{ id: string; total: number }> {
  const run = await h.deps.jobs.enqueue({ kind: 'test.long', exclusive: false });
  await h.deps.jobs.claim({ workerId: 'w', leaseMs: 60_000, kinds: ['test.long'] });
  for (let from = 0; from < SEEDED; from += 500) {
    const batch = Array.from({ length: 500 }, (_, i) => ({ type: 'step', message: `step ${from + i + 1}` }));
    expect(await h.deps.jobs.appendEvents(run.id, batch)).toBe(true);
  }
  await h.deps.jobs.finish(run.id, 'w', { state: 'failed', error: 'the last step broke' });
  // queued, started, the seeded steps, failed
  return { id: run.id, total: SEEDED + 3 };
}

async function readSse(res: Response) {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((b) => b.trim() && !b.startsWith(':'))
    .map((block) => {
      const lines = block.split('\n');
      const field = (k: string) => lines.find((l) => l.startsWith(`${k}:`))?.slice(k.length + 1).trim();
      return { event: field('event'), data: JSON.parse(field('data') ?? 'null') };
    });
}

const stream = (runId: string, headers: Record<string, string> = {}) =>
  h.app.request(`/v1/runs/${runId}/events`, { headers: { authorization: `Bearer ${h.adminToken}`, accept: 'text/event-stream', ...headers } });

const seqs = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('run events past one read', () => {
  it('a stream attached after the end, or resuming far behind, carries every event to the terminal one before `end`', async () => {
    const run = await failedRunWithLongLog();

    const all = await readSse(await stream(run.id));
    const events = all.filter((e) => e.event === 'run-event').map((e) => e.data);
    expect(events.map((e) => e.seq)).toEqual(seqs(1, run.total));
    expect(events.at(-1)).toMatchObject({ type: 'failed', level: 'error', message: 'run failed: the last step broke' });
    expect(all.at(-1)).toMatchObject({ event: 'end', data: { state: 'failed', error: 'the last step broke' } });

    const resumed = await readSse(await stream(run.id, { 'last-event-id': '10' }));
    expect(resumed.filter((e) => e.event === 'run-event').map((e) => e.data.seq)).toEqual(seqs(11, run.total));
    expect(resumed.at(-1)!.event).toBe('end');
  });

  it('a stream with a read budget (the edge: a request has so many subrequests) ends with a retry, and the next one picks it up to the end', async () => {
    const run = await failedRunWithLongLog();
    h.deps.settings.streamReads = 4;
    const first = await (await stream(run.id)).text();
    // Three reads bring the whole log; the state and the last flush would not fit in the fourth.
    expect(first).toMatch(/\nretry: \d+\n: this stream's reads are spent; reconnect with Last-Event-ID 2503\n/);
    expect(first).not.toContain('event: end');
    const ids = [...first.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids).toEqual(seqs(1, run.total));
    const second = await readSse(await stream(run.id, { 'last-event-id': String(ids.at(-1)) }));
    expect(second).toEqual([{ event: 'end', data: expect.objectContaining({ id: run.id, state: 'failed' }) }]);

    // Without a budget (the runner) one stream carries it all.
    delete h.deps.settings.streamReads;
    expect((await readSse(await stream(run.id))).at(-1)!.event).toBe('end');
  });

  it('the JSON log comes in pages: `limit` (at most 1000), `more` while events remain, `next` as the following `after`, `last` the end', async () => {
    const run = await failedRunWithLongLog();

    const first = await h.call('GET', `/v1/runs/${run.id}/events`);
    expect(first.status).toBe(200);
    expect(first.body.events).toHaveLength(1000);
    expect(first.body).toMatchObject({ more: true, next: 1000, last: run.total });
    // `last` goes straight to the end: the error of a failed run is in its last page.
    const tail = (await h.call('GET', `/v1/runs/${run.id}/events?after=${first.body.last - 5}`)).body;
    expect(tail.events.map((e: { seq: number }) => e.seq)).toEqual(seqs(run.total - 4, run.total));
    expect(tail.events.at(-1)).toMatchObject({ type: 'failed' });

    const seen: number[] = [];
    let after = 0;
    for (let pages = 0; ; pages++) {
      expect(pages).toBeLessThan(10);
      const page = (await h.call('GET', `/v1/runs/${run.id}/events?after=${after}&limit=700`)).body;
      seen.push(...page.events.map((e: { seq: number }) => e.seq));
      if (!page.more) {
        expect(page.events.at(-1)).toMatchObject({ type: 'failed', message: 'run failed: the last step broke' });
        break;
      }
      after = page.next;
    }
    expect(seen).toEqual(seqs(1, run.total));

    // Past the end: nothing more, and `next` stays where it was asked to start.
    expect((await h.call('GET', `/v1/runs/${run.id}/events?after=${run.total}`)).body).toMatchObject({ events: [], more: false, next: run.total });
    // A page that ends exactly on the last event says there is no more.
    expect((await h.call('GET', `/v1/runs/${run.id}/events?after=${run.total - 3}&limit=3`)).body).toMatchObject({ more: false, next: run.total });
    for (const bad of ['0', '1001', '1.5', 'x']) {
      expect((await h.call('GET', `/v1/runs/${run.id}/events?limit=${bad}`)).status).toBe(400);
    }
  });
});

describe('Last-Event-ID', () => {
  it('a value `?after=` would refuse is answered 400 with the error body, before any stream starts', async () => {
    const run = await failedRunWithLongLog();
    for (const bad of ['1e400', '1.5', 'abc', '-1', '99999999999999999999']) {
      const res = await h.call('GET', `/v1/runs/${run.id}/events`, { headers: { accept: 'text/event-stream', 'last-event-id': bad } });
      expect(res.status, bad).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/application\/json/);
      expect(res.body).toEqual({
        error: { code: 'invalid_request', message: 'Last-Event-ID: must be an event id (a whole number, 0 or more)', details: { field: 'Last-Event-ID' } },
      });
    }
    expect((await h.call('GET', `/v1/runs/${run.id}/events?after=1e400`, { headers: { accept: 'text/event-stream' } })).status).toBe(400);

    // A good one still resumes, and wins over `?after=` as before.
    const resumed = await readSse(await stream(run.id, { 'last-event-id': `${run.total - 1}` }));
    expect(resumed.map((e) => e.event)).toEqual(['run-event', 'end']);
    expect(resumed[0]!.data.seq).toBe(run.total);
  });
});
