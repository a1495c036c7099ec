// The unmodified @libsql/client/web inside workerd (wrangler's unstable_startWorker, which bundles
// like `wrangler deploy` and runs the Worker in miniflare) against the Hrana simulator on loopback,
// sharing one database with a Node "home runner" that uses the project's openDatabase + run queue.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unstable_startWorker } from 'wrangler';
import { openDatabase, runMigrations, type Database } from '../db/client.ts';
import { createRunBus } from '../lib/jobs/bus.ts';
import { createJobs } from '../lib/jobs/queue.ts';
import { startHranaSim, type HranaSim } from './sim/hrana/server.ts';

const TOKEN = 'edge-fixture-token';
const FIXTURE = fileURLToPath(new URL('./fixtures/edge-worker/wrangler.toml', import.meta.url));

// No telemetry to Cloudflare and no fetch of the Request.cf object: this suite stays on loopback.
process.env.WRANGLER_SEND_METRICS = 'false';
process.env.CLOUDFLARE_CF_FETCH_ENABLED = 'false';

let dir: string;
let sim: HranaSim;
let home: Database;
let worker: Awaited<ReturnType<typeof unstable_startWorker>>;
let workerUrl: URL;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hrana-workerd-'));
  sim = await startHranaSim({ dbPath: join(dir, 'shared.db'), authToken: TOKEN });
  home = await openDatabase({ url: sim.url, authToken: TOKEN });
  await runMigrations(home);
  worker = await unstable_startWorker({
    config: FIXTURE,
    bindings: {
      REZUS_DB_URL: { type: 'plain_text', value: sim.url },
      REZUS_DB_AUTH_TOKEN: { type: 'secret_text', value: TOKEN },
    },
    // Local state (caches, traces) goes to the temp dir, not next to the fixture in the repo.
    dev: { server: { hostname: '127.0.0.1', port: 0 }, inspector: false, logLevel: 'warn', persist: join(dir, 'wrangler-state') },
  });
  workerUrl = await worker.url;
}, 90_000);

afterAll(async () => {
  await worker?.dispose();
  home?.close();
  await sim?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('a Worker in workerd and a Node runner sharing the Hrana sim', () => {
  it('queues a run at the edge that the home runner claims; the edge then reads its outcome', async () => {
    const queued = await fetch(new URL('/runs', workerUrl), { method: 'POST' });
    expect(queued.status).toBe(202);
    const run = (await queued.json()) as { id: string; state: string; createdBy: string };
    expect(run.state).toBe('queued');
    expect(run.createdBy).toBe('edge');

    const jobs = createJobs({ db: home.db, clock: { now: () => Date.now() }, bus: createRunBus() });
    const claimed = await jobs.claim({ workerId: 'home', leaseMs: 30_000, kinds: ['edge.fixture'] });
    expect(claimed?.id).toBe(run.id);
    expect(await jobs.finish(run.id, 'home', { state: 'succeeded', result: { ok: true } })).toBe(true);

    const seen = await fetch(new URL(`/runs/${run.id}`, workerUrl));
    expect(seen.status).toBe(200);
    const body = (await seen.json()) as { run: { state: string; leaseOwner: string | null; result: unknown }; events: Array<{ type: string }> };
    expect(body.run.state).toBe('succeeded');
    expect(body.run.result).toEqual({ ok: true });
    expect(body.events.map((e) => e.type)).toEqual(['queued', 'started', 'succeeded']);
  });

  it("runs the Worker's cron, which only enqueues; the run waits for home", async () => {
    const cron = await fetch(new URL('/cdn-cgi/handler/scheduled?cron=*/5+*+*+*+*', workerUrl));
    expect(cron.status).toBe(200);
    const jobs = createJobs({ db: home.db, clock: { now: () => Date.now() }, bus: createRunBus() });
    const claimed = await jobs.claim({ workerId: 'home', leaseMs: 30_000, kinds: ['edge.cron'] });
    expect(claimed?.createdBy).toBe('cron');
    expect(claimed?.attempt).toBe(1);
  });

  it('answers 404 for an unknown run without touching the queue', async () => {
    const before = sim.stats().requests;
    const res = await fetch(new URL('/runs/run_doesnotexist', workerUrl));
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { code: 'not_found', message: 'no such run' } });
    // The lookup went to the database through the sim (the Worker holds no state of its own).
    expect(sim.stats().requests).toBeGreaterThan(before);
  });
});
