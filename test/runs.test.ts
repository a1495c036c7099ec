import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readdirSync, statSync } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createClient } from '@libsql/client';
import type { Deps } from '../functions/context.ts';
import { backupJob } from '../functions/backup/job.ts';
import { backupExecutor, removePartialBackups } from '../runner/jobs/backup/executor.ts';
import { bind } from '../runner/jobs/registry.ts';
import { RunAbort, type ExecutorRegistry } from '../lib/jobs/executor.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { ENDED_STATES, untilAborted, waitForRun, createHarness, seedCluster, type Harness } from './support/harness.ts';

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

function startWorker(executors: ExecutorRegistry<Deps>, leaseMs = 3000) {
  worker = createWorker({ deps: h.deps, executors, workerId: 'test', leaseMs, concurrency: 2, pollMs: 50 });
  worker.start();
  return worker;
}


/** Reads an SSE response to its end and returns the parsed events. */
async function readSse(res: Response) {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((b) => b.trim())
    .map((block) => {
      const lines = block.split('\n');
      const field = (k: string) => lines.find((l) => l.startsWith(`${k}:`))?.slice(k.length + 1).trim();
      return { event: field('event'), id: field('id'), data: JSON.parse(field('data') ?? 'null') };
    });
}

describe('backup run, end to end', () => {
  it('queues over HTTP, runs on the worker, and writes a usable copy', async () => {
    const { clusterId } = await seedCluster(h);
    startWorker(Object.fromEntries([bind(backupJob, backupExecutor)]));
    const res = await h.call('POST', '/v1/backups');
    expect(res.status).toBe(202);
    const run = await waitForRun(h, res.body.run.id, ['succeeded', 'failed']);
    expect(run.state).toBe('succeeded');
    const file = (run.result as { file: string }).file;
    const copy = createClient({ url: `file:${file}` });
    const rows = await copy.execute({ sql: 'SELECT id FROM clusters', args: [] });
    expect(rows.rows.map((r) => r.id)).toEqual([clusterId]);
    copy.close();

    const events = await h.call('GET', `/v1/runs/${run.id}/events`);
    expect(events.body.events.map((e: { type: string }) => e.type)).toEqual(['queued', 'started', 'backup.start', 'backup.done', 'succeeded']);

    // Its duration lands in the run histogram, by kind and final state.
    const metrics = await h.call('GET', '/metrics');
    expect(metrics.body).toMatch(/rezus_run_duration_seconds_count\{kind="backup",state="succeeded"\} 1\n/);
  });

  it('is admin only', async () => {
    const { tenantId } = await seedCluster(h);
    const tok = await h.call('POST', `/v1/tenants/${tenantId}/tokens`, { body: { name: 'x' } });
    expect((await h.call('POST', '/v1/backups', { token: tok.body.token })).status).toBe(403);
  });

  /** Pads the database with `mb` MiB of random blobs, so that copying it takes a while. */
  async function padDatabase(mb: number) {
    const c = h.deps.database.client;
    await c.execute('CREATE TABLE pad (b BLOB)');
    await c.execute({ sql: 'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) INSERT INTO pad SELECT randomblob(1048576) FROM n', args: [mb] });
  }

  /** The sizes of the unfinished copies in the backups directory, right now. */
  function partialSizes(): number[] {
    const dir = join(h.dir, 'backups');
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return [];
    }
    return names.filter((n) => n.endsWith('.partial')).map((n) => statSync(join(dir, n), { throwIfNoEntry: false })?.size ?? 0);
  }

  it('copies off the event loop: timers fire while the copy is written, and a run with a short lease carries on', async () => {
    await padDatabase(300);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // A lease of 450 ms: a copy that held the event loop longer ended this run (lease lost).
    startWorker(
      {
        ...Object.fromEntries([bind(backupJob, backupExecutor)]),
        hold: async ({ signal }) => {
          await Promise.race([gate, untilAborted(signal)]);
          signal.throwIfAborted();
          return { held: true };
        },
      },
      450,
    );
    const held = await h.deps.jobs.enqueue({ kind: 'hold', exclusive: false });
    await waitForRun(h, held.id, ['running']);
    // Every turn of the loop notes the size of the copy being written.
    const seen: number[] = [];
    const ticks = setInterval(() => seen.push(...partialSizes()), 5);
    try {
      const res = await h.call('POST', '/v1/backups');
      expect(res.status).toBe(202);
      const backup = await waitForRun(h, res.body.run.id);
      expect(backup.state).toBe('succeeded');
      const { bytes } = backup.result as { bytes: number };
      // The loop turned while the copy was still being written (a copy on the loop's own thread
      // is only ever seen whole).
      expect(seen.filter((size) => size > 0 && size < bytes).length).toBeGreaterThan(0);
    } finally {
      clearInterval(ticks);
    }
    release();
    expect((await waitForRun(h, held.id)).state).toBe('succeeded');
  });

  it('a backup canceled during its copy leaves no file in the backups directory', async () => {
    await padDatabase(300);
    startWorker(Object.fromEntries([bind(backupJob, backupExecutor)]));
    const res = await h.call('POST', '/v1/backups');
    const id = res.body.run.id as string;
    // Canceled once the copy is under way.
    const ended = async () => (ENDED_STATES as readonly string[]).includes((await h.deps.jobs.get(id))?.state ?? '');
    await expect.poll(async () => partialSizes().some((size) => size > 0) || (await ended()), { interval: 5, timeout: 20_000 }).toBe(true);
    expect((await h.call('POST', `/v1/runs/${id}/cancel`)).status).toBe(202);
    expect((await waitForRun(h, id)).state).toBe('canceled');
    // The copy's thread finishes the statement it is in, then its file goes.
    await expect.poll(() => readdir(join(h.dir, 'backups')), { interval: 50, timeout: 20_000 }).toEqual([]);
  });

  it('start-up removes what an interrupted copy left (the copy and its journal), not the backups', async () => {
    const dir = join(h.dir, 'backups');
    await mkdir(dir, { recursive: true });
    for (const name of ['rezus-a.db', 'rezus-b.db.partial', 'rezus-b.db.partial-journal']) await writeFile(join(dir, name), 'x');
    expect(await removePartialBackups(h.dir)).toBe(2);
    expect(await readdir(dir)).toEqual(['rezus-a.db']);
  });
});

describe('runs API', () => {
  it('streams a live run over SSE to its end, resuming after Last-Event-ID', async () => {
    const { clusterId, tenantId } = await seedCluster(h);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    startWorker({
      slow: async ({ emit }) => {
        await emit({ type: 'step', message: 'one' });
        await gate;
        await emit({ type: 'step', message: 'two' });
        return { ok: true };
      },
    });
    const run = await h.deps.jobs.enqueue({ kind: 'slow', clusterId, tenantId, exclusive: true });
    const pending = h.app.request(`/v1/runs/${run.id}/events`, {
      headers: { authorization: `Bearer ${h.adminToken}`, accept: 'text/event-stream' },
    });
    await waitForRun(h, run.id, ['running']);
    setTimeout(release, 100);
    const res = await pending;
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const events = await readSse(res);
    const messages = events.filter((e) => e.event === 'run-event').map((e) => e.data.message);
    expect(messages).toEqual(['slow run queued', 'slow run started', 'one', 'two', 'run succeeded']);
    const end = events.at(-1)!;
    expect(end.event).toBe('end');
    expect(end.data.state).toBe('succeeded');

    const resumed = await readSse(
      await h.app.request(`/v1/runs/${run.id}/events`, {
        headers: { authorization: `Bearer ${h.adminToken}`, accept: 'text/event-stream', 'last-event-id': '3' },
      }),
    );
    expect(resumed.filter((e) => e.event === 'run-event').map((e) => e.data.seq)).toEqual([4, 5]);
  });

  it('keeps a quiet stream open with comments until the run ends', async () => {
    startWorker({
      quiet: async ({ signal }) => {
        await untilAborted(signal);
        throw signal.reason;
      },
    }, 600);
    const run = await h.deps.jobs.enqueue({ kind: 'quiet', exclusive: false });
    await waitForRun(h, run.id, ['running']);
    const res = await h.app.request(`/v1/runs/${run.id}/events`, {
      headers: { authorization: `Bearer ${h.adminToken}`, accept: 'text/event-stream' },
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes(': keep-alive')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    expect(text.startsWith(': following run')).toBe(true);
    expect(text).toContain(': keep-alive');
    await h.call('POST', `/v1/runs/${run.id}/cancel`);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    expect(text).toMatch(/event: end\ndata: \{[^\n]*"state":"canceled"/);
  });

  it('a second cluster-changing run gets 409 with the active id, and cancel stops the running one', async () => {
    const { clusterId, tenantId } = await seedCluster(h);
    startWorker({
      wait: async ({ signal, emit }) => {
        await emit({ type: 'waiting', message: 'waiting for cancel' });
        await untilAborted(signal);
        throw signal.reason;
      },
    }, 600);
    const run = await h.deps.jobs.enqueue({ kind: 'wait', clusterId, tenantId, exclusive: true });
    await waitForRun(h, run.id, ['running']);
    const second = await h.deps.jobs.enqueue({ kind: 'wait', clusterId, tenantId, exclusive: true }).catch((e) => e);
    expect(second.activeRunId).toBe(run.id);

    const cancel = await h.call('POST', `/v1/runs/${run.id}/cancel`);
    expect(cancel.status).toBe(202);
    const done = await waitForRun(h, run.id, ['canceled', 'failed', 'succeeded']);
    expect(done.state).toBe('canceled');
    const list = await h.call('GET', `/v1/runs?cluster=${clusterId}`);
    expect(list.body.runs.map((r: { id: string; state: string }) => [r.id, r.state])).toEqual([[run.id, 'canceled']]);
  });

  it('a failing executor fails the run with its message', async () => {
    startWorker({
      boom: async () => {
        throw new Error('disk on fire');
      },
    });
    const run = await h.deps.jobs.enqueue({ kind: 'boom', exclusive: false });
    const done = await waitForRun(h, run.id, ['failed', 'succeeded']);
    expect(done).toMatchObject({ state: 'failed', error: 'disk on fire' });
  });

  it('shutdown lets a short run finish, and interrupts a long one after the grace period', async () => {
    let finishQuick!: () => void;
    const quickGate = new Promise<void>((r) => (finishQuick = r));
    const w = startWorker({
      quick: async () => {
        await quickGate;
        return 'done';
      },
      long: async ({ signal }) => {
        await untilAborted(signal);
        throw signal.reason;
      },
    });
    const quick = await h.deps.jobs.enqueue({ kind: 'quick', exclusive: false });
    const long = await h.deps.jobs.enqueue({ kind: 'long', exclusive: false });
    await waitForRun(h, quick.id, ['running']);
    await waitForRun(h, long.id, ['running']);
    setTimeout(finishQuick, 50);
    await w.stop(400);
    expect((await h.deps.jobs.get(quick.id))?.state).toBe('succeeded');
    const l = await h.deps.jobs.get(long.id);
    expect(l).toMatchObject({ state: 'interrupted', error: 'runner shut down' });
    worker = undefined;
  });

  it('shutdown is one budget: runs may finish for its first half, then are stopped with the rest as their bound', async () => {
    let stopAsked = 0;
    let abortedAfter = -1;
    let reason: unknown;
    const w = startWorker({
      long: async ({ signal }) => {
        await untilAborted(signal);
        abortedAfter = performance.now() - stopAsked;
        reason = signal.reason;
        throw signal.reason;
      },
    });
    const long = await h.deps.jobs.enqueue({ kind: 'long', exclusive: false });
    await waitForRun(h, long.id, ['running']);
    stopAsked = performance.now();
    await w.stop(2_000);
    worker = undefined;
    expect(abortedAfter).toBeGreaterThanOrEqual(900);
    expect(abortedAfter).toBeLessThan(1_800);
    expect(reason).toBeInstanceOf(RunAbort);
    const { reason: why, stopWithinMs } = reason as RunAbort;
    expect(why).toBe('shutdown');
    expect(stopWithinMs).toBeGreaterThan(0);
    // The bound ends where the budget does, not a full budget later.
    expect(abortedAfter + stopWithinMs!).toBeLessThanOrEqual(2_050);
    expect((await h.deps.jobs.get(long.id))?.state).toBe('interrupted');
  });

  it('rejects bad query parameters with 400', async () => {
    expect((await h.call('GET', '/v1/runs?cluster=../../etc')).status).toBe(400);
    expect((await h.call('GET', '/v1/runs?limit=9999')).status).toBe(400);
    expect((await h.call('GET', '/v1/runs?bogus=1')).status).toBe(400);
  });
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
