// Webhook at the edge → run claimed at home. The Worker (built by `wrangler deploy --dry-run`)
// runs in workerd and queues provision runs in the Hrana simulator; a real home runner process,
// sharing that database, claims them by polling. The floor is the runner's poll interval (the
// longest a queued run can wait for the next claim); the same deliveries sent to the home runner
// itself (its in-process bus wakes the worker at once) are the baseline measured in the same run.
// Target: p95 ≤ floor + 100 ms.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';
import { signDelivery } from '../lib/auth/webhook.ts';
import { startRunner } from '../test/support/runner-process.ts';
import { buildWorker, wranglerNode } from '../test/support/wrangler-build.ts';
import { startHranaSim } from '../test/sim/hrana/server.ts';

// Nothing leaves the machine: no wrangler telemetry, no Request.cf download.
process.env.WRANGLER_SEND_METRICS = 'false';
process.env.CLOUDFLARE_CF_FETCH_ENABLED = 'false';

const DELIVERIES = 50;
const HOME_DELIVERIES = 10;
/** runner/worker.ts's default poll interval, which runner/host.ts keeps. */
const POLL_MS = 500;

const found = await wranglerNode();
if ('missing' in found) {
  console.log(`bench/edge skipped: ${found.missing}`);
  process.exit(0);
}

const DB_TOKEN = randomBytes(16).toString('hex');
const ADMIN = randomBytes(24).toString('hex');
const dir = await mkdtemp(join(tmpdir(), 'rezus-bench-edge-'));
const sim = await startHranaSim({ dbPath: join(dir, 'shared.db'), authToken: DB_TOKEN });
const EDGE_KEY = randomBytes(32).toString('base64');
const [bundle, runner] = await Promise.all([
  buildWorker(found.node, join(import.meta.dirname, '..', 'wrangler.toml'), join(dir, 'dist')),
  startRunner({
    REZUS_DB_URL: sim.url,
    REZUS_DB_AUTH_TOKEN: DB_TOKEN,
    REZUS_DATA_DIR: join(dir, 'home'),
    REZUS_HOST: '127.0.0.1',
    REZUS_PORT: '0',
    REZUS_ADMIN_TOKEN: ADMIN,
    REZUS_MASTER_KEY: randomBytes(32).toString('base64'),
    REZUS_EDGE_KEY: EDGE_KEY,
    REZUS_COLLECT_CRON: '0 0 1 1 *',
    REZUS_LOG_LEVEL: 'info',
  }),
]);
const mf = new Miniflare(
  convertV4MiniflareOptions({
    modules: true,
    scriptPath: bundle,
    modulesRoot: dirname(bundle),
    compatibilityDate: '2026-11-01',
    compatibilityFlags: ['nodejs_compat'],
    cf: false,
    bindings: { REZUS_DB_URL: sim.url, REZUS_DB_AUTH_TOKEN: DB_TOKEN, REZUS_EDGE_KEY: EDGE_KEY },
  }),
);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;
async function home(method: string, path: string, body?: unknown): Promise<Json> {
  const res = await fetch(new URL(path, runner.url), {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return (await res.json()) as Json;
}

try {
  const tenant = (await home('POST', '/v1/tenants', { name: 'bench' })).id as string;
  await home('POST', '/v1/clusters', { tenant, name: 'lab', endpoint: 'https://[2001:db8::1]:6443', providerSettings: { local: {} } });
  const secret = (await home('POST', `/v1/tenants/${tenant}/webhook-secret`)).secret as string;

  type Send = (url: string, init: RequestInit) => Promise<Response>;
  const viaEdge: Send = (url, init) => mf.dispatchFetch(url, init as never) as unknown as Promise<Response>;
  const viaHome: Send = (url, init) => fetch(url, init);

  /** Sends one signed delivery; resolves with ms from send to the run's claim at home, once the run has ended. */
  async function deliver(send: Send, base: string, n: number): Promise<number> {
    const raw = new TextEncoder().encode(JSON.stringify({ cluster: 'lab', mode: 'plan' }));
    // The previous run's end wakes the worker, which then sleeps a full interval: sending right
    // after would always land at the same phase of the poll. Real deliveries arrive at any phase.
    await new Promise((r) => setTimeout(r, Math.random() * POLL_MS));
    const sent = Date.now();
    const res = await send(`${base}/v1/hooks/${tenant}/provision`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signedHeaders(secret, raw, `bench-${base.length}-${n}`) },
      body: raw,
    });
    const body = (await res.json()) as Json;
    if (res.status !== 202) throw new Error(`delivery ${n}: ${res.status} ${JSON.stringify(body)}`);
    const id = body.run.id as string;
    // One provision per cluster at a time: the next delivery waits for this run to end.
    for (let i = 0; i < 600; i++) {
      const run = await home('GET', `/v1/runs/${id}`);
      if (!['queued', 'running'].includes(run.state as string)) return (run.startedAt as number) - sent;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`run ${id} did not end`);
  }

  // Warm-up: the Worker's first request builds its isolate.
  await deliver(viaEdge, 'http://edge.test', -1);
  const edge: number[] = [];
  for (let i = 0; i < DELIVERIES; i++) edge.push(await deliver(viaEdge, 'http://edge.test', i));
  const direct: number[] = [];
  for (let i = 0; i < HOME_DELIVERIES; i++) direct.push(await deliver(viaHome, runner.url, i));

  const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;
  const floor = POLL_MS;
  const target = floor + 100;
  console.log(`webhook → claimed at home, ${DELIVERIES} deliveries through the Worker (workerd → Hrana sim → home runner polling every ${POLL_MS} ms)`);
  console.log(`  edge:     p50 ${pct(edge, 50)} ms   p95 ${pct(edge, 95)} ms   max ${Math.max(...edge)} ms`);
  console.log(`  home API: p50 ${pct(direct, 50)} ms   p95 ${pct(direct, 95)} ms   (${HOME_DELIVERIES} deliveries; the bus wakes the worker in-process)`);
  console.log(`  floor (poll interval) ${floor} ms; target p95 ≤ ${target} ms`);
  console.log(`  ratio p95 / floor = ${(pct(edge, 95) / floor).toFixed(2)}; p95 / target = ${(pct(edge, 95) / target).toFixed(2)} → ${pct(edge, 95) <= target ? 'met' : 'missed'}`);
} finally {
  await mf.dispose();
  runner.child.kill('SIGTERM');
  await runner.child;
  await sim.close();
  await rm(dir, { recursive: true, force: true });
}

/** The replay-proof scheme: the signature covers the timestamp and the delivery id with the body. */
function signedHeaders(secret: string, raw: Uint8Array, delivery: string): Record<string, string> {
  const ts = String(Math.floor(Date.now() / 1000));
  return { 'x-rezus-signature': signDelivery(secret, ts, delivery, raw), 'x-rezus-timestamp': ts, 'x-rezus-delivery': delivery };
}
