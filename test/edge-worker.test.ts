// The product Worker (functions/worker.ts) built by `wrangler deploy --dry-run`, run in workerd
// (miniflare) against the Hrana simulator, with a real home runner process sharing the database:
// a signed webhook at the edge becomes a run that home claims and executes with tofu on the
// `local` module, and the edge then reads the run, its events and the cluster.
import { readFile } from 'node:fs/promises';
import { createParser } from 'eventsource-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkPortable } from '../scripts/portable-bundle.ts';
import { signedHeaders, startEdgeStack, type EdgeStack } from './support/edge-stack.ts';
import { nodeImports, wranglerNode, WORKERD_PROVIDED } from './support/wrangler-build.ts';

const found = await wranglerNode();
if ('missing' in found) console.warn(`edge-worker tests skipped: ${found.missing}`);

let stack: EdgeStack | undefined;
let bundleSource: string;
let tenant: string;
let cluster: string;
let webhookSecret: string;
let tenantToken: string;

// Response bodies are checked field by field below.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

const home = (method: string, path: string, body?: unknown) => stack!.home(method, path, body);

async function edge(method: string, path: string, init: { body?: string | Uint8Array; headers?: Record<string, string>; token?: string } = {}) {
  const res = await stack!.mf.dispatchFetch(`http://edge.test${path}`, {
    method,
    headers: { ...(init.token ? { authorization: `Bearer ${init.token}` } : {}), ...init.headers },
    body: init.body,
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as Json, headers: res.headers };
}

function hook(payload: unknown, delivery: string, secret = webhookSecret) {
  const raw = new TextEncoder().encode(JSON.stringify(payload));
  return edge('POST', `/v1/hooks/${tenant}/provision`, {
    body: raw,
    headers: { 'content-type': 'application/json', ...signedHeaders(secret, raw, delivery) },
  });
}

describe.skipIf('missing' in found)('the Worker in workerd with a home runner sharing the database', () => {
  beforeAll(async () => {
    stack = await startEdgeStack({
      wranglerNode: (found as { node: string }).node,
      label: 'edge-worker',
      // Heartbeats every second, so a cancel asked at the edge reaches the running tofu soon.
      runnerEnv: { REZUS_LEASE_S: '3' },
      // Few reads per stream, so following a run takes several streams, as on the free plan.
      workerBindings: { REZUS_FOLLOW_POLL_MS: '200', REZUS_STREAM_READS: '5' },
    });
    bundleSource = await readFile(stack.bundle, 'utf8');

    // Home does what needs the master key: the cluster (RSA-4096 CAs), its machines, the webhook secret.
    const t = await home('POST', '/v1/tenants', { name: 'edge' });
    tenant = t.body.id;
    const c = await home('POST', '/v1/clusters', { tenant, name: 'lab', endpoint: 'https://[2001:db8::1]:6443', providerSettings: { local: { apply_delay_seconds: 0 } } });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    cluster = c.body.id;
    for (const [i, name] of ['cp1', 'w1'].entries()) {
      const m = await home('POST', `/v1/clusters/${cluster}/machines`, { name, role: i === 0 ? 'controlplane' : 'worker', provider: 'local' });
      expect(m.status).toBe(201);
    }
    const s = await home('POST', `/v1/tenants/${tenant}/webhook-secret`, undefined);
    expect(s.status).toBe(201);
    webhookSecret = s.body.secret;
    const tok = await home('POST', `/v1/tenants/${tenant}/tokens`, { name: 'edge-reader', scopes: ['read', 'write'] });
    tenantToken = tok.body.token;
  }, 80_000);

  afterAll(async () => stack?.close());

  it('bundles without a Node-only module', async () => {
    const outside = nodeImports(bundleSource).filter((m) => !WORKERD_PROVIDED.has(m));
    expect(outside).toEqual([]);
    expect((await checkPortable('functions/worker.ts')).violations).toEqual([]);
  }, 60_000);

  it('turns a signed webhook into a run that home executes with tofu; the edge reads it back', async () => {
    const accepted = await hook({ cluster: 'lab', mode: 'apply' }, 'dlv-1');
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
    const run = accepted.body.run;
    expect(run).toMatchObject({ kind: 'provision', cluster, state: 'queued', createdBy: 'webhook:dlv-1' });

    // Redelivery starts nothing and names the first run.
    const again = await hook({ cluster: 'lab', mode: 'apply' }, 'dlv-1');
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ duplicate: true, run: { id: run.id } });

    // Live events through the Worker (SSE, polling the database) until the run ends at home. A
    // stream ends once its reads (subrequests) are spent, and is picked up as EventSource does,
    // with Last-Event-ID and after the `retry` it was given.
    const seen: Array<{ event?: string; data: string; id?: string }> = [];
    const retries: number[] = [];
    const deadline = Date.now() + 60_000;
    let streams = 0;
    while (!seen.some((e) => e.event === 'end') && Date.now() < deadline) {
      const lastId = seen.findLast((e) => e.id)?.id;
      const res = await stack!.mf.dispatchFetch(`http://edge.test/v1/runs/${run.id}/events`, {
        headers: { authorization: `Bearer ${tenantToken}`, accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
      });
      expect(res.status).toBe(200);
      streams++;
      const parser = createParser({ onEvent: (e) => seen.push({ event: e.event, data: e.data, id: e.id }), onRetry: (ms) => retries.push(ms) });
      const reader = res.body!.getReader();
      const text = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.feed(text.decode(value, { stream: true }));
      }
      if (!seen.some((e) => e.event === 'end')) await new Promise((r) => setTimeout(r, retries.at(-1) ?? 500));
    }
    const end = seen.find((e) => e.event === 'end');
    expect(end, 'the stream ended with the run').toBeDefined();
    // Every stream but the last gave up on its budget, not on an error.
    expect(streams).toBeGreaterThan(1);
    expect(retries).toHaveLength(streams - 1);
    expect(JSON.parse(end!.data)).toMatchObject({ id: run.id, state: 'succeeded' });
    const events = seen.filter((e) => e.event === 'run-event').map((e) => JSON.parse(e.data) as { type: string; seq: number });
    // Across the reconnects: each event once, in order, none missing.
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const types = events.map((e) => e.type);
    expect(types[0]).toBe('queued');
    expect(types).toContain('started');
    expect(types.at(-1)).toBe('succeeded');

    const shown = await edge('GET', `/v1/runs/${run.id}`, { token: tenantToken });
    expect(shown.body).toMatchObject({ state: 'succeeded', attempt: 1 });
    expect(shown.body.startedAt).toBeGreaterThanOrEqual(run.createdAt);
    const listed = await edge('GET', `/v1/runs?cluster=${cluster}`, { token: tenantToken });
    expect(listed.body.runs.map((r: { id: string }) => r.id)).toContain(run.id);

    // tofu's apply at home recorded the machines; the edge reads them from the shared database.
    const machines = await edge('GET', `/v1/clusters/${cluster}/machines`, { token: tenantToken });
    expect(machines.status).toBe(200);
    expect(machines.body.machines.map((m: { name: string }) => m.name).sort()).toEqual(['cp1', 'w1']);
    const c = await edge('GET', `/v1/clusters/${cluster}`, { token: tenantToken });
    expect(c.body).toMatchObject({ id: cluster, name: 'lab' });
    const versions = await edge('GET', `/v1/clusters/${cluster}/state/versions`, { token: tenantToken });
    expect(versions.status).toBe(200);
    expect(versions.body.versions.length).toBeGreaterThan(0);
  }, 80_000);

  it('cancels at the edge a run that home is executing', async () => {
    // A new machine whose creation sleeps, so the apply is still running when the cancel arrives.
    expect((await home('PATCH', `/v1/clusters/${cluster}`, { providerSettings: { local: { apply_delay_seconds: 60 } } })).status).toBe(200);
    expect((await home('POST', `/v1/clusters/${cluster}/machines`, { name: 'w2', role: 'worker', provider: 'local' })).status).toBe(201);
    const accepted = await hook({ cluster: 'lab', mode: 'apply' }, 'dlv-slow');
    expect(accepted.status).toBe(202);
    const id = accepted.body.run.id as string;
    const end = Date.now() + 45_000;
    const waitFor = async (pred: (r: Json) => boolean) => {
      for (;;) {
        const r = (await edge('GET', `/v1/runs/${id}/events`, { token: tenantToken })).body;
        if (pred(r)) return r;
        if (Date.now() > end) throw new Error(`run ${id}: ${JSON.stringify(r.run)}`);
        await new Promise((res) => setTimeout(res, 200));
      }
    };
    // Waits for tofu to be creating w2, not merely for the claim.
    await waitFor((r) => r.run.state === 'running' && r.events.some((e: Json) => JSON.stringify(e).includes('w2')));
    const cancel = await edge('POST', `/v1/runs/${id}/cancel`, { token: tenantToken });
    expect(cancel.status).toBe(202);
    expect(cancel.body.cancelRequested).toBe(true);
    const done = await waitFor((r) => !['queued', 'running'].includes(r.run.state));
    expect(done.run.state).toBe('canceled');
  }, 60_000);

  it('refuses a bad signature and starts nothing', async () => {
    const before = (await edge('GET', `/v1/runs?cluster=${cluster}`, { token: tenantToken })).body.runs.length;
    const forged = await hook({ cluster: 'lab', mode: 'apply', destroy: true }, 'dlv-forged', 'whsec_not-the-secret');
    expect(forged.status).toBe(401);
    expect(forged.body.error.code).toBe('bad_signature');
    expect((await edge('GET', `/v1/runs?cluster=${cluster}`, { token: tenantToken })).body.runs.length).toBe(before);
  });

  it('sends what needs the master key or key generation home with 409 runs_at_home', async () => {
    const create = await edge('POST', '/v1/clusters', {
      token: tenantToken,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tenant, name: 'other', endpoint: 'https://[2001:db8::2]:6443' }),
    });
    expect(create.status).toBe(409);
    expect(create.body.error.code).toBe('runs_at_home');
    const talosconfig = await edge('GET', `/v1/clusters/${cluster}/talosconfig`, { token: tenantToken });
    expect(talosconfig.body.error.code).toBe('runs_at_home');
    const state = await edge('GET', `/v1/state/${tenant}/${cluster}`);
    expect(state.body.error.code).toBe('runs_at_home');
    const clusters = await edge('GET', '/v1/clusters', { token: tenantToken });
    expect(clusters.body.clusters.map((c: { name: string }) => c.name)).toEqual(['lab']);
  });

  it('runs a cron tick that only enqueues a collect pass; home claims it', async () => {
    // miniflare's Fetcher type omits scheduled(); the object has it.
    const worker = (await stack!.mf.getWorker()) as unknown as { scheduled(o: { cron: string }): Promise<{ outcome: string }> };
    expect((await worker.scheduled({ cron: '*/5 * * * *' })).outcome).toBe('ok');
    const runs = (await home('GET', '/v1/runs?limit=50')).body.runs as Array<{ id: string; kind: string; createdBy: string }>;
    const pass = runs.find((r) => r.kind === 'collect' && r.createdBy === 'cron');
    expect(pass).toBeDefined();
    // A pass spans every tenant, so only the admin sees it; the Worker holds no admin token here.
    expect((await edge('GET', `/v1/runs/${pass!.id}`, { token: tenantToken })).status).toBe(404);
    const end = Date.now() + 30_000;
    let run = (await home('GET', `/v1/runs/${pass!.id}`)).body;
    while (run.startedAt === null && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 100));
      run = (await home('GET', `/v1/runs/${pass!.id}`)).body;
    }
    expect(run.startedAt, 'home claimed the pass').not.toBeNull();
    expect(run.attempt).toBe(1);
  }, 60_000);

  it('limits failed authentications per client address across requests, as home does', async () => {
    const guess = (ip: string) => edge('GET', `/v1/clusters/${cluster}`, { token: 'rz_not-a-token', headers: { 'cf-connecting-ip': ip } });
    const answers = [];
    for (let i = 0; i < 22; i++) answers.push((await guess('198.51.100.77')).status);
    expect(answers.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(answers.slice(20)).toEqual([429, 429]);
    // Another client is not held back by it.
    expect((await guess('198.51.100.78')).status).toBe(401);
  });
});
