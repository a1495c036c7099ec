import { createHmac } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { findDelivery, insertDelivery, recordDelivery } from '../functions/webhooks/deliveries.ts';
import { loadWebhookSecret } from '../functions/webhooks/secret.ts';
import { signBody, signDelivery, verifySignature } from '../lib/auth/webhook.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';

const body = new TextEncoder().encode('{"ref":"refs/heads/main","cluster":"c1"}');
const secret = 'whsec_test-secret';
// Computed independently of signBody, so a bug in both would not cancel out.
const expected = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

describe('verifySignature', () => {
  it('accepts the HMAC-SHA256 of the exact bytes, in either hex case', () => {
    expect(signBody(secret, body)).toBe(expected);
    expect(verifySignature(secret, body, expected)).toBe(true);
    expect(verifySignature(secret, body, expected.toUpperCase().replace('SHA256=', 'sha256='))).toBe(true);
    expect(verifySignature(Buffer.from(secret), body, expected)).toBe(true);
  });

  it('rejects a changed body, a wrong secret and a missing header', () => {
    const reserialised = new TextEncoder().encode(JSON.stringify(JSON.parse(new TextDecoder().decode(body)), null, 1));
    expect(verifySignature(secret, reserialised, expected)).toBe(false);
    expect(verifySignature('whsec_other', body, expected)).toBe(false);
    expect(verifySignature('', body, `sha256=${createHmac('sha256', '').update(body).digest('hex')}`)).toBe(false);
    expect(verifySignature(secret, body, undefined)).toBe(false);
    expect(verifySignature(secret, body, null)).toBe(false);
  });

  it.each([
    ['empty', ''],
    ['no algorithm', expected.slice(7)],
    ['other algorithm', expected.replace('sha256=', 'sha1=')],
    ['truncated', expected.slice(0, -2)],
    ['too long', expected + '00'],
    ['not hex', expected.slice(0, -1) + 'z'],
    ['two signatures', `${expected},${expected}`],
  ])('treats a malformed header (%s) as a bad signature', (_label, header) => {
    expect(verifySignature(secret, body, header)).toBe(false);
  });
});

describe('webhook secret and deliveries', () => {
  let h: Harness;
  let ids: { tenantId: string; clusterId: string };
  beforeEach(async () => {
    h = await createHarness();
    ids = await seedCluster(h, 'alpha');
  });
  afterEach(async () => h.close());

  it('mints a secret shown once and stored sealed; rotating replaces it', async () => {
    const first = await h.call('POST', `/v1/tenants/${ids.tenantId}/webhook-secret`);
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ rotated: false, header: 'X-Rezus-Signature' });
    const s1 = first.body.secret as string;
    expect(s1.length).toBeGreaterThan(40);
    const rows = await h.deps.database.client.execute('SELECT * FROM webhook_secrets');
    expect(JSON.stringify(rows.rows)).not.toContain(s1);
    expect(await loadWebhookSecret(h.deps, ids.tenantId)).toBe(s1);
    expect(verifySignature((await loadWebhookSecret(h.deps, ids.tenantId))!, body, signBody(s1, body))).toBe(true);

    const second = await h.call('POST', `/v1/tenants/${ids.tenantId}/webhook-secret`);
    expect(second.body.rotated).toBe(true);
    const s2 = await loadWebhookSecret(h.deps, ids.tenantId);
    expect(s2).toBe(second.body.secret);
    expect(verifySignature(s2!, body, signBody(s1, body))).toBe(false);
    const audit = JSON.stringify((await h.call('GET', '/v1/audit')).body);
    expect(audit).toContain('webhook_secret.rotate');
    expect(audit).not.toContain(s1);
  });

  it('is per tenant: another tenant cannot mint one, and none exists until minted', async () => {
    const other = await seedCluster(h, 'beta');
    const tok = await h.call('POST', `/v1/tenants/${ids.tenantId}/tokens`, { body: { name: 't' } });
    expect((await h.call('POST', `/v1/tenants/${other.tenantId}/webhook-secret`, { token: tok.body.token })).status).toBe(404);
    expect(await loadWebhookSecret(h.deps, other.tenantId)).toBeNull();
    const reader = await h.call('POST', `/v1/tenants/${ids.tenantId}/tokens`, { body: { name: 'r', scopes: ['read'] } });
    expect((await h.call('POST', `/v1/tenants/${ids.tenantId}/webhook-secret`, { token: reader.body.token })).status).toBe(403);
  });

  it('records a delivery id once per tenant and reports the first one on redelivery', async () => {
    const other = await seedCluster(h, 'beta');
    expect(await findDelivery(h.deps, ids.tenantId, 'd-1')).toBeNull();
    const first = await recordDelivery(h.deps, { tenantId: ids.tenantId, deliveryId: 'd-1', runId: 'run_first' });
    expect(first.recorded).toBe(true);

    const again = await recordDelivery(h.deps, { tenantId: ids.tenantId, deliveryId: 'd-1', runId: 'run_second' });
    expect(again).toMatchObject({ recorded: false, existing: { runId: 'run_first' } });
    // In a batch (with the run it starts), a copy fails on the unique index and changes nothing.
    await expect(h.deps.db.batch([insertDelivery(h.deps, { tenantId: ids.tenantId, deliveryId: 'd-1', runId: 'run_third' })])).rejects.toThrow();
    expect((await findDelivery(h.deps, ids.tenantId, 'd-1'))?.runId).toBe('run_first');
    // The same id from another tenant is another delivery.
    expect((await recordDelivery(h.deps, { tenantId: other.tenantId, deliveryId: 'd-1' })).recorded).toBe(true);
    await expect(recordDelivery(h.deps, { tenantId: ids.tenantId, deliveryId: '' })).rejects.toThrow();
  });

  it('lets exactly one of several concurrent copies of a delivery through', async () => {
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => recordDelivery(h.deps, { tenantId: ids.tenantId, deliveryId: 'dup', runId: `run_${i}` })));
    expect(results.filter((r) => r.recorded)).toHaveLength(1);
    const rows = await h.deps.database.client.execute("SELECT count(*) AS n FROM webhook_deliveries WHERE delivery_id = 'dup'");
    expect(rows.rows[0]!.n).toBe(1);
  });
});

describe('webhook intake: one run per delivery, whatever fails', () => {
  let h: Harness;
  let ids: { tenantId: string; clusterId: string };
  let hookSecret: string;
  beforeEach(async () => {
    h = await createHarness();
    ids = await seedCluster(h, 'alpha');
    hookSecret = (await h.call('POST', `/v1/tenants/${ids.tenantId}/webhook-secret`)).body.secret as string;
  });
  afterEach(async () => h.close());

  const plan = JSON.stringify({ mode: 'plan' });
  // Re-signed on every call, as a sender's retry is (a fresh timestamp, the same delivery id).
  const deliver = (deliveryId: string, raw = plan) => {
    const at = String(Math.floor(Date.now() / 1000));
    return h.call('POST', `/v1/hooks/${ids.tenantId}/clusters/c1/provision`, {
      body: raw,
      token: null,
      headers: { 'x-rezus-delivery': deliveryId, 'x-rezus-timestamp': at, 'x-rezus-signature': signDelivery(hookSecret, at, deliveryId, new TextEncoder().encode(raw)) },
    });
  };
  const github = (raw: string, event: string, query = '', cluster = 'c1') =>
    h.call('POST', `/v1/hooks/${ids.tenantId}/clusters/${cluster}/provision${query}`, {
      body: raw,
      token: null,
      headers: {
        'x-github-delivery': '72d3162e-cc78-11e3-81ab-4c9367dc0958',
        'x-github-event': event,
        'x-hub-signature-256': `sha256=${createHmac('sha256', hookSecret).update(raw).digest('hex')}`,
      },
    });
  const runIds = async () => (await h.deps.jobs.list({ clusterId: ids.clusterId })).map((r) => r.id);

  /**
   * Makes the database refuse every `op` on `table` until the returned undo runs: the failure of
   * one statement, as a dropped Hrana request or a full disk causes, whatever code issues it.
   */
  async function refuse(table: string, op: 'INSERT' | 'UPDATE' | 'DELETE') {
    const name = `refuse_${op}_${table}`.toLowerCase();
    await h.deps.database.client.execute(`CREATE TRIGGER ${name} BEFORE ${op} ON ${table} BEGIN SELECT RAISE(ABORT, 'injected failure'); END`);
    return async () => void (await h.deps.database.client.execute(`DROP TRIGGER ${name}`));
  }

  it('starts the run on a retry when queuing it failed and so did every clean-up', async () => {
    const undo = [await refuse('runs', 'INSERT'), await refuse('webhook_deliveries', 'DELETE')];
    expect((await deliver('d-lost')).status).toBe(500);
    for (const u of undo) await u();

    const retry = await deliver('d-lost');
    expect(retry.status, JSON.stringify(retry.body)).toBe(202);
    expect(await runIds()).toEqual([retry.body.run.id]);
    expect((await findDelivery(h.deps, ids.tenantId, 'd-lost'))?.runId).toBe(retry.body.run.id);
  });

  it('queues no second run when a write after queuing the first fails and the first run has ended', async () => {
    const undo = await refuse('webhook_deliveries', 'UPDATE');
    const first = await deliver('d-twice');
    await undo();
    const [runId] = await runIds();
    await h.deps.jobs.requestCancel(runId!);

    const retry = await deliver('d-twice');
    expect(await runIds()).toEqual([runId]);
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({ duplicate: true, run: { id: runId, state: 'canceled' } });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    expect(first.body.run.id).toBe(runId);
  });

  it('answers with the run when the commit succeeded but its answer was lost; the retry is a duplicate', async () => {
    const batch = h.deps.db.batch.bind(h.deps.db);
    vi.spyOn(h.deps.db, 'batch').mockImplementationOnce(async (statements) => {
      await batch(statements);
      throw new Error('fetch failed: connection reset');
    });
    const first = await deliver('d-reset');
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    const retry = await deliver('d-reset');
    expect(retry.body).toMatchObject({ duplicate: true, run: { id: first.body.run.id } });
    expect(await runIds()).toEqual([first.body.run.id]);
  });

  it('writes nothing when the cluster already has an active run', async () => {
    const busy = await h.call('POST', `/v1/clusters/${ids.clusterId}/provision`, { body: { mode: 'plan' } });
    expect(busy.status).toBe(202);
    const refused = await deliver('d-busy');
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'run_active', details: { activeRun: busy.body.run.id } });
    expect(await findDelivery(h.deps, ids.tenantId, 'd-busy')).toBeNull();
    await h.deps.jobs.requestCancel(busy.body.run.id);
    expect((await deliver('d-busy')).status).toBe(202);
  });

  it('a GitHub push refused while a run is active starts its run when redelivered as sent, never sent with another mode or cluster', async () => {
    const busy = await h.call('POST', `/v1/clusters/${ids.clusterId}/provision`, { body: { mode: 'plan' } });
    const push = JSON.stringify({ ref: 'refs/heads/main', after: 'cafe', before: 'beef' });
    const refused = await github(push, 'push', '?mode=plan');
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('run_active');
    // Still busy: the redelivery as sent is refused for the same reason, and stays redeliverable.
    expect((await github(push, 'push', '?mode=plan')).body.error.code).toBe('run_active');
    await h.deps.jobs.requestCancel(busy.body.run.id);

    // Its bytes with another ?mode=, or to the same cluster under another name, are not this delivery.
    for (const [query, cluster] of [['?mode=apply', 'c1'], ['', 'c1'], ['?mode=plan', ids.clusterId]] as const) {
      const replay = await github(push, 'push', query, cluster);
      expect(replay.status, `${cluster}${query}`).toBe(409);
      expect(replay.body.error.code).toBe('delivery_reused');
    }
    expect(await runIds()).toEqual([busy.body.run.id]);

    const redelivered = await github(push, 'push', '?mode=plan');
    expect(redelivered.status, JSON.stringify(redelivered.body)).toBe(202);
    expect(redelivered.body.run.params).toMatchObject({ mode: 'plan' });
    expect(await findDelivery(h.deps, ids.tenantId, `github:${createHmac('sha256', hookSecret).update(push).digest('hex')}`)).toMatchObject({ runId: redelivered.body.run.id, refusedFor: null });
    expect((await github(push, 'push', '?mode=plan')).body).toMatchObject({ duplicate: true, run: { id: redelivered.body.run.id } });
    expect((await github(push, 'push', '?mode=apply')).body).toMatchObject({ duplicate: true, run: { id: redelivered.body.run.id } });
    expect((await runIds()).sort()).toEqual([busy.body.run.id, redelivered.body.run.id].sort());
  });

  it('a GitHub push refused for its URL (no such cluster, a bad ?mode=) is not taken for another URL later', async () => {
    const push = JSON.stringify({ ref: 'refs/heads/main', after: 'd00d', before: 'cafe' });
    expect((await github(push, 'push', '?mode=apply', 'nosuch')).status).toBe(404);
    expect((await github(push, 'push', '?mode=apply')).body.error.code).toBe('delivery_reused');
    const other = JSON.stringify({ ref: 'refs/heads/main', after: 'd11d', before: 'cafe' });
    expect((await github(other, 'push', '?mode=destroy')).status).toBe(400);
    expect((await github(other, 'push', '?mode=apply')).body.error.code).toBe('delivery_reused');
    expect(await runIds()).toEqual([]);
  });

  it("records a GitHub ping, so its bytes resent as a push with ?mode=apply start nothing", async () => {
    const ping = JSON.stringify({ zen: 'Design for failure.', hook_id: 1 });
    const first = await github(ping, 'ping');
    expect(first.status).toBe(200);

    const replay = await github(ping, 'push', '?mode=apply');
    expect(await runIds()).toEqual([]);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ duplicate: true, run: null });
    expect(first.body).toMatchObject({ ok: true, event: 'ping', ignored: true });
  });

  it('starts runs only for push events carrying a push payload; other deliveries are recorded and ignored', async () => {
    const pushLike = JSON.stringify({ ref: 'refs/heads/main', after: 'f00d' });
    const release = await github(pushLike, 'release', '?mode=apply');
    expect(release.status).toBe(200);
    expect(release.body).toMatchObject({ ignored: true, event: 'release' });
    expect((await github(pushLike, 'push', '?mode=apply')).body).toMatchObject({ duplicate: true, run: null });

    // A ping that was never recorded (sent before this rule, or refused then) is no push either.
    const oldPing = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 2 });
    const asPush = await github(oldPing, 'push', '?mode=apply');
    expect(asPush.status).toBe(200);
    expect(asPush.body).toMatchObject({ ignored: true, event: 'push' });
    expect(await runIds()).toEqual([]);

    const push = JSON.stringify({ ref: 'refs/heads/main', after: 'beef', before: 'f00d' });
    const started = await github(push, 'push', '?mode=plan');
    expect(started.status).toBe(202);
    expect(started.body.run.params).toMatchObject({ mode: 'plan', destroy: false });
    expect((await github(push, 'push', '?mode=apply')).body).toMatchObject({ duplicate: true, run: { id: started.body.run.id } });
    expect(await runIds()).toEqual([started.body.run.id]);
  });
});
