import { createHmac } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findDelivery, recordDelivery, setDeliveryRun } from '../functions/webhooks/deliveries.ts';
import { loadWebhookSecret } from '../functions/webhooks/secret.ts';
import { signBody, verifySignature } from '../lib/auth/webhook.ts';
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
    const first = await recordDelivery(h.deps, { tenantId: ids.tenantId, deliveryId: 'd-1' });
    expect(first.recorded).toBe(true);
    await setDeliveryRun(h.deps, ids.tenantId, 'd-1', 'run_first');

    const again = await recordDelivery(h.deps, { tenantId: ids.tenantId, deliveryId: 'd-1', runId: 'run_second' });
    expect(again).toMatchObject({ recorded: false, existing: { runId: 'run_first' } });
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
