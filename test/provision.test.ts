import { createHmac } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { machines, stateLocks } from '../db/schema/index.ts';
import { signBody } from '../lib/auth/webhook.ts';
import { waitForRun, type Harness } from './support/harness.ts';
import { startServedRunner } from './support/served-runner.ts';
import { basic, lockInfo, stateClient } from './support/state.ts';
import { mintStateCredential } from '../functions/state/credentials.ts';

let h: Harness;
let stop: () => Promise<void>;
beforeEach(async () => {
  ({ h, close: stop } = await startServedRunner({ concurrency: 2 }));
});
afterEach(() => stop());


async function events(runId: string) {
  return (await h.call('GET', `/v1/runs/${runId}/events`)).body.events as { type: string; message: string; data: Record<string, unknown> | null }[];
}

async function localCluster(opts: { machines?: string[]; delay?: number } = {}) {
  const t = await h.call('POST', '/v1/tenants', { body: { name: 'home' } });
  const c = await h.call('POST', '/v1/clusters', {
    body: {
      tenant: t.body.id,
      name: 'lab',
      endpoint: 'https://[2001:db8::1]:6443',
      providerSettings: { local: { apply_delay_seconds: opts.delay ?? 0 } },
    },
  });
  expect(c.status, JSON.stringify(c.body)).toBe(201);
  for (const [i, name] of (opts.machines ?? ['cp1', 'w1']).entries()) {
    const m = await h.call('POST', `/v1/clusters/${c.body.id}/machines`, {
      body: { name, role: i === 0 ? 'controlplane' : 'worker', provider: 'local' },
    });
    expect(m.status).toBe(201);
  }
  return { tenantId: t.body.id as string, clusterId: c.body.id as string };
}

const provision = (clusterId: string, body: Record<string, unknown>) => h.call('POST', `/v1/clusters/${clusterId}/provision`, { body });

describe('provision with real tofu on modules/local', () => {
  it('plan → approve → apply puts the outputs on the machines; a second apply changes nothing; versions are kept', async () => {
    const { clusterId } = await localCluster();
    const plan = await provision(clusterId, { mode: 'plan' });
    expect(plan.status).toBe(202);
    const planned = await waitForRun(h, plan.body.run.id);
    expect(planned.state, planned.error ?? '').toBe('succeeded');
    expect(planned.result).toMatchObject({ mode: 'plan', summary: { add: 2, change: 0, destroy: 0 }, hasChanges: true });
    const planEvents = await events(planned.id);
    expect(planEvents.map((e) => e.type)).toEqual(expect.arrayContaining(['provision.init', 'tofu.planned_change', 'tofu.change_summary', 'provision.planned']));
    // Nothing is applied before approval.
    expect((await h.call('GET', `/v1/clusters/${clusterId}/machines`)).body.machines.every((m: { ipv6: string | null }) => m.ipv6 === null)).toBe(true);

    const approve = await h.call('POST', `/v1/runs/${planned.id}/approve`);
    expect(approve.status).toBe(202);
    const applied = await waitForRun(h, approve.body.run.id);
    expect(applied.state, applied.error ?? '').toBe('succeeded');
    expect(applied.result).toMatchObject({ mode: 'apply', planRun: planned.id, applied: true });
    const ms = (await h.call('GET', `/v1/clusters/${clusterId}/machines`)).body.machines;
    expect(ms.map((m: { name: string; ipv4: string; ipv6: string; state: string }) => [m.name, m.ipv4, m.ipv6, m.state])).toEqual([
      ['cp1', '192.0.2.10', '2001:db8::10', 'provisioned'],
      ['w1', '192.0.2.11', '2001:db8::11', 'provisioned'],
    ]);
    expect((await events(applied.id)).map((e) => e.type)).toEqual(expect.arrayContaining(['tofu.apply_start', 'tofu.apply_complete', 'provision.addresses']));

    // The same plan cannot be applied twice.
    expect((await h.call('POST', `/v1/runs/${planned.id}/approve`)).status).toBe(409);

    const again = await provision(clusterId, { mode: 'apply' });
    const noop = await waitForRun(h, again.body.run.id);
    expect(noop.result).toMatchObject({ applied: false, summary: { add: 0, change: 0, destroy: 0 } });

    const versions = await h.call('GET', `/v1/clusters/${clusterId}/state/versions`);
    expect(versions.status).toBe(200);
    expect(versions.body.versions.length).toBeGreaterThanOrEqual(1);
    expect(await h.deps.db.select().from(stateLocks)).toEqual([]);
  });

  it('an approval whose taking of the plan fails queues no apply: the run and the taking commit together', async () => {
    const { clusterId } = await localCluster({ machines: ['cp1'] });
    const planned = await waitForRun(h, (await provision(clusterId, { mode: 'plan' })).body.run.id);
    const runsBefore = (await h.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs.length;
    // The write that marks the plan taken fails (a dropped request, a full disk).
    await h.deps.database.client.execute("CREATE TRIGGER refuse_plan_take BEFORE UPDATE ON provision_plans BEGIN SELECT RAISE(ABORT, 'injected failure'); END");
    expect((await h.call('POST', `/v1/runs/${planned.id}/approve`)).status).toBe(500);
    await h.deps.database.client.execute('DROP TRIGGER refuse_plan_take');
    expect((await h.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs.length).toBe(runsBefore);
    // The plan is still there to approve, once.
    const approve = await h.call('POST', `/v1/runs/${planned.id}/approve`);
    expect(approve.status).toBe(202);
    expect((await waitForRun(h, approve.body.run.id)).state).toBe('succeeded');
  });

  it('refuses a stale plan: the state moved since it was made', async () => {
    const { clusterId } = await localCluster();
    const planned = await waitForRun(h, (await provision(clusterId, { mode: 'plan' })).body.run.id);
    await waitForRun(h, (await provision(clusterId, { mode: 'apply' })).body.run.id);
    const stale = await h.call('POST', `/v1/runs/${planned.id}/approve`);
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('stale_plan');
  });

  it('destroy removes the machines and clears their addresses', async () => {
    const { clusterId } = await localCluster({ machines: ['cp1'] });
    await waitForRun(h, (await provision(clusterId, { mode: 'apply' })).body.run.id);
    const d = await waitForRun(h, (await provision(clusterId, { mode: 'apply', destroy: true })).body.run.id);
    expect(d.state, d.error ?? '').toBe('succeeded');
    expect(d.result).toMatchObject({ summary: { destroy: 1 } });
    const [m] = await h.deps.db.select().from(machines);
    expect(m).toMatchObject({ ipv4: null, ipv6: null, state: 'new' });
  });

  it('a second run on the cluster is refused with the active run id', async () => {
    const { clusterId } = await localCluster({ machines: ['cp1'], delay: 30 });
    const first = await provision(clusterId, { mode: 'apply' });
    const second = await provision(clusterId, { mode: 'plan' });
    expect(second.status).toBe(409);
    expect(second.body.error.details.activeRun).toBe(first.body.run.id);
    await h.call('POST', `/v1/runs/${first.body.run.id}/cancel`);
    await waitForRun(h, first.body.run.id);
  });

  it('a state lock held elsewhere fails the run clearly, naming the holder', async () => {
    const { clusterId, tenantId } = await localCluster({ machines: ['cp1'] });
    const other = await h.deps.jobs.enqueue({ kind: 'manual', tenantId, clusterId, exclusive: false });
    const cred = await mintStateCredential(h.deps, { runId: other.id, tenantId, clusterId, ttlMs: 60_000 });
    const holder = lockInfo('someone@elsewhere');
    expect((await stateClient(h, tenantId, clusterId, basic(cred)).lock(holder)).status).toBe(200);
    const run = await waitForRun(h, (await provision(clusterId, { mode: 'apply' })).body.run.id);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/lock/i);
    expect(JSON.stringify(await events(run.id))).toContain(holder.ID);
    // The other holder keeps its lock: the failed run did not steal or clear it.
    expect((await h.deps.db.select().from(stateLocks)).map((l) => l.lockId)).toEqual([holder.ID]);
  });

  it('cancel mid-apply interrupts tofu, releases the lock, and a later apply works', async () => {
    const { clusterId } = await localCluster({ machines: ['cp1'], delay: 30 });
    const run = (await provision(clusterId, { mode: 'apply' })).body.run;
    for (let i = 0; i < 400; i++) {
      if ((await events(run.id)).some((e) => e.type === 'tofu.apply_start')) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await h.call('POST', `/v1/runs/${run.id}/cancel`);
    const done = await waitForRun(h, run.id);
    expect(done.state).toBe('canceled');
    expect(await h.deps.db.select().from(stateLocks)).toEqual([]);

    // Faster second attempt: the module delay is a cluster setting.
    await h.deps.database.client.execute({
      sql: "UPDATE clusters SET settings = json_set(settings, '$.providerSettings.local.apply_delay_seconds', 0) WHERE id = ?",
      args: [clusterId],
    });
    const later = await waitForRun(h, (await provision(clusterId, { mode: 'apply' })).body.run.id);
    expect(later.state, later.error ?? '').toBe('succeeded');
    const [m] = await h.deps.db.select().from(machines).where(eq(machines.clusterId, clusterId));
    expect(m?.ipv6).toBe('2001:db8::10');
  });

  it('never puts user_data or credentials into run events', async () => {
    const { clusterId } = await localCluster({ machines: ['cp1'] });
    const run = await waitForRun(h, (await provision(clusterId, { mode: 'apply' })).body.run.id);
    const config = (await h.call('GET', `/v1/clusters/${clusterId}/machines/${(await h.deps.db.select().from(machines))[0]!.id}/config`)).body as string;
    const all = JSON.stringify(await events(run.id));
    const secrets = await h.deps.newClusterSecrets();
    for (const needle of [config.slice(0, 200), secrets.certs.os.keyPem.split('\n')[1]!, secrets.bootstrapToken, Buffer.from(config).toString('base64').slice(0, 60)]) {
      expect(all).not.toContain(needle);
    }
  });

  it('explains a cluster without cloud machines', async () => {
    const { clusterId } = await localCluster({ machines: [] });
    const run = await waitForRun(h, (await provision(clusterId, { mode: 'plan' })).body.run.id);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/no cloud machines/);
  });
});

describe('provision webhook', () => {
  async function hook(tenantId: string, body: string, headers: Record<string, string>, path = 'provision') {
    const res = await h.app.request(`/v1/hooks/${tenantId}/${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
    return { status: res.status, body: await res.json() };
  }
  // The scheme README documents, computed here independently of lib/auth/webhook.ts.
  const signed = (secret: string, body: string, delivery: string, at = Math.floor(Date.now() / 1000)) => ({
    'x-rezus-delivery': delivery,
    'x-rezus-timestamp': String(at),
    'x-rezus-signature': `v1=${createHmac('sha256', secret).update(`${at}.${delivery}.${body}`).digest('hex')}`,
  });

  it('verifies the signature, dedupes deliveries, rejects bad JSON', async () => {
    const { tenantId, clusterId } = await localCluster({ machines: ['cp1'] });
    const secret = (await h.call('POST', `/v1/tenants/${tenantId}/webhook-secret`)).body.secret as string;
    expect(secret).toBeTruthy();
    const body = JSON.stringify({ cluster: 'lab', mode: 'plan' });

    expect((await hook(tenantId, body, { 'x-rezus-delivery': 'd1' })).status).toBe(401);
    expect((await hook(tenantId, body, signed('wrong', body, 'd1'))).status).toBe(401);
    // An unknown tenant is 404, not 401.
    const unknownTenant = await hook('tn_aaaaaaaaaaaaaaaa', body, signed(secret, body, 'd1'));
    expect(unknownTenant.status).toBe(404);
    expect(unknownTenant.body.error.code).toBe('not_found');
    // A signature over other bytes does not verify this body.
    expect((await hook(tenantId, body + ' ', signed(secret, body, 'd1'))).status).toBe(401);
    // The body-only signature of old is replayable and no longer accepted.
    expect((await hook(tenantId, body, { 'x-rezus-delivery': 'd1', 'x-rezus-signature': signBody(secret, Buffer.from(body)) })).status).toBe(401);

    const good = await hook(tenantId, body, signed(secret, body, 'd1'));
    expect(good.status).toBe(202);
    const runId = good.body.run.id;
    const replay = await hook(tenantId, body, signed(secret, body, 'd1'));
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ duplicate: true, run: { id: runId } });
    expect((await h.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs).toHaveLength(1);

    const broken = '{"cluster": ';
    const bad = await hook(tenantId, broken, signed(secret, broken, 'd2'));
    expect(bad.status).toBe(400);
    const unknown = JSON.stringify({ cluster: 'nope' });
    expect((await hook(tenantId, unknown, signed(secret, unknown, 'd3'))).status).toBe(404);
    await waitForRun(h, runId);
  });

  it('cannot be replayed: a captured request under a new delivery id or after 5 minutes starts nothing', async () => {
    const { tenantId, clusterId } = await localCluster({ machines: ['cp1'] });
    const secret = (await h.call('POST', `/v1/tenants/${tenantId}/webhook-secret`)).body.secret as string;
    const body = JSON.stringify({ cluster: 'lab', mode: 'plan' });
    const captured = signed(secret, body, 'orig-1');
    const first = await hook(tenantId, body, captured);
    expect(first.status).toBe(202);
    // The attacker swaps the delivery id: the signature no longer matches.
    expect((await hook(tenantId, body, { ...captured, 'x-rezus-delivery': 'attacker-2' })).status).toBe(401);
    // …or the timestamp.
    expect((await hook(tenantId, body, { ...captured, 'x-rezus-timestamp': String(Number(captured['x-rezus-timestamp']) + 1) })).status).toBe(401);
    // Validly signed but 5 min 1 s old (or ahead): refused as stale.
    const old = await hook(tenantId, body, signed(secret, body, 'late-1', Math.floor(Date.now() / 1000) - 301));
    expect(old.status).toBe(401);
    expect(old.body.error.code).toBe('stale_signature');
    expect((await hook(tenantId, body, signed(secret, body, 'early-1', Math.floor(Date.now() / 1000) + 301))).status).toBe(401);
    // The same delivery inside the window is a duplicate.
    expect((await hook(tenantId, body, captured)).body.duplicate).toBe(true);
    expect((await h.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs).toHaveLength(1);
    await waitForRun(h, first.body.run.id);
  });

  it("accepts GitHub's own X-Hub-Signature-256 with the cluster in the URL, once per body", async () => {
    const { tenantId, clusterId } = await localCluster({ machines: ['cp1'] });
    const secret = (await h.call('POST', `/v1/tenants/${tenantId}/webhook-secret`)).body.secret as string;
    const push = JSON.stringify({ ref: 'refs/heads/main', after: 'f00d', pushed_at: 1764000000 });
    const gh = (body: string, delivery: string, extra: Record<string, string> = {}) => ({
      'x-github-delivery': delivery,
      'x-github-event': 'push',
      'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
      ...extra,
    });
    const url = `clusters/lab/provision?mode=plan`;
    const ping = await hook(tenantId, '{"zen":"x"}', gh('{"zen":"x"}', 'p-1', { 'x-github-event': 'ping' }), url);
    expect(ping.status).toBe(200);
    const first = await hook(tenantId, push, gh(push, '72d3162e-cc78-11e3-81ab-4c9367dc0958'), url);
    expect(first.status).toBe(202);
    expect(first.body.run.params).toMatchObject({ mode: 'plan', destroy: false });
    // Same signed body, new delivery id: recognised as the same delivery.
    const replay = await hook(tenantId, push, gh(push, 'aaaaaaaa-0000-0000-0000-000000000000'), url);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ duplicate: true, run: { id: first.body.run.id } });
    expect((await hook(tenantId, push, { ...gh(push, 'x'), 'x-hub-signature-256': 'sha256=' + '0'.repeat(64) }, url)).status).toBe(401);
    expect((await hook('tn_aaaaaaaaaaaaaaaa', push, gh(push, 'y'), url)).status).toBe(404);
    expect((await hook(tenantId, push, gh(push, 'z'), 'clusters/nope/provision')).status).toBe(404);
    expect((await h.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs).toHaveLength(1);
    await waitForRun(h, first.body.run.id);
  });
});
