// Webhook at the edge → run claimed at home. The Worker (built by `wrangler deploy --dry-run`)
// runs in workerd and queues provision runs in the Hrana simulator; a real home runner process,
// sharing that database, claims them by polling. The floor is the runner's poll interval (the
// longest a queued run can wait for the next claim); the same deliveries sent to the home runner
// itself (its in-process bus wakes the worker at once) are the baseline measured in the same run.
// Target: p95 ≤ floor + 100 ms.
import { signedHeaders, startEdgeStack } from '../test/support/edge-stack.ts';
import { wranglerNode } from '../test/support/wrangler-build.ts';

const DELIVERIES = 50;
const HOME_DELIVERIES = 10;
/** runner/worker.ts's default poll interval, which runner/host.ts keeps. */
const POLL_MS = 500;

const found = await wranglerNode();
if ('missing' in found) {
  console.log(`bench/edge skipped: ${found.missing}`);
  process.exit(0);
}

const stack = await startEdgeStack({ wranglerNode: found.node, label: 'bench-edge', runnerEnv: { REZUS_LOG_LEVEL: 'info' } });
const { mf, runnerUrl } = stack;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;
const home = async (method: string, path: string, body?: unknown): Promise<Json> => (await stack.home(method, path, body)).body;

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
  for (let i = 0; i < HOME_DELIVERIES; i++) direct.push(await deliver(viaHome, runnerUrl, i));

  const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;
  const floor = POLL_MS;
  const target = floor + 100;
  console.log(`webhook → claimed at home, ${DELIVERIES} deliveries through the Worker (workerd → Hrana sim → home runner polling every ${POLL_MS} ms)`);
  console.log(`  edge:     p50 ${pct(edge, 50)} ms   p95 ${pct(edge, 95)} ms   max ${Math.max(...edge)} ms`);
  console.log(`  home API: p50 ${pct(direct, 50)} ms   p95 ${pct(direct, 95)} ms   (${HOME_DELIVERIES} deliveries; the bus wakes the worker in-process)`);
  console.log(`  floor (poll interval) ${floor} ms; target p95 ≤ ${target} ms`);
  console.log(`  ratio p95 / floor = ${(pct(edge, 95) / floor).toFixed(2)}; p95 / target = ${(pct(edge, 95) / target).toFixed(2)} → ${pct(edge, 95) <= target ? 'met' : 'missed'}`);
} finally {
  await stack.close();
}
