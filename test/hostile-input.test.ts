import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../runner/config.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';
import { FormClient, csrfOf } from './support/dashboard-client.ts';

// Issue #12 items 9 and 10, as a user or an attacker would hit them over HTTP.
let h: Harness;
beforeEach(async () => {
  // The peer address comes from a header only because these requests have no socket.
  h = await createHarness({ app: { dashboard: { remoteAddress: (c) => c.req.header('x-test-peer') } } });
});
afterEach(async () => h.close());

const count = async (table: string) => Number((await h.deps.database.client.execute(`SELECT count(*) AS n FROM ${table}`)).rows[0]!.n);

describe('sessions and auth (item 9)', () => {
  it('logout ends the session server-side: a copy of the cookie is signed out too', async () => {
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const stolen = new Map(b.cookies);
    expect((await b.get('/')).status).toBe(200);
    const out = await b.submit('/', '/logout', {});
    expect(out.status).toBe(303);
    const thief = new FormClient(h.app);
    for (const [k, v] of stolen) thief.cookies.set(k, v);
    const page = await thief.get('/');
    expect(page.status).toBe(303);
    expect(page.location).toMatch(/\/login$/);
  });

  it('failed bearer attempts are limited per client with 429 + Retry-After; other clients are not', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 25; i++) {
      statuses.push((await h.call('GET', '/v1/tenants', { token: `guess-${i}`, headers: { 'x-test-peer': '192.0.2.7' } })).status);
    }
    expect(statuses.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(20).every((s) => s === 429)).toBe(true);
    const limited = await h.call('GET', '/v1/tenants', { headers: { 'x-test-peer': '192.0.2.7' } });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.body.error.code).toBe('rate_limited');
    // The right token from another client still works.
    expect((await h.call('GET', '/v1/tenants', { headers: { 'x-test-peer': '192.0.2.8' } })).status).toBe(200);
  });

  it('failed dashboard logins and state basic-auth attempts are limited too', async () => {
    const b = new FormClient(h.app, { headers: { 'x-test-peer': '198.51.100.1' } });
    const seen: number[] = [];
    for (let i = 0; i < 22; i++) seen.push((await b.submit('/login', '/login', { token: `nope-${i}` })).status);
    expect(seen.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(seen.at(-1)).toBe(429);
    const { tenantId, clusterId } = await seedCluster(h, 'st');
    const basic = (p: string) => 'Basic ' + Buffer.from(`run_x:${p}`).toString('base64');
    const st: number[] = [];
    for (let i = 0; i < 22; i++) {
      const res = await h.app.request(`/v1/state/${tenantId}/${clusterId}`, { headers: { authorization: basic(`pw${i}`), 'x-test-peer': '198.51.100.2' } });
      st.push(res.status);
      if (res.status === 429) expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    }
    expect(st.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(st.at(-1)).toBe(429);
  });

  it('an admin token set by configuration has at least 32 characters', () => {
    expect(() => loadConfig({ REZUS_ADMIN_TOKEN: 'x'.repeat(31) })).toThrow(/32 characters/);
    expect(loadConfig({ REZUS_ADMIN_TOKEN: 'x'.repeat(32) }).adminToken).toBe('x'.repeat(32));
  });
});

describe('no 5xx on bad input (item 10)', () => {
  it('a broken multipart body to the dashboard (unauthenticated) is a 4xx', async () => {
    const page = await new FormClient(h.app).get('/login');
    const cookie = page.headers.getSetCookie()[0]!.split(';')[0]!;
    const res = await h.app.request('/login', {
      method: 'POST',
      headers: { cookie, 'content-type': 'multipart/form-data; boundary=XYZ' },
      body: `--XYZ\r\nContent-Disposition: form-data; name="_csrf"\r\n\r\n${csrfOf(page.text)}\r\n--XY`,
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
  });

  it('a machine patch nested 800 levels is a 400, as JSON and as YAML text', async () => {
    const { clusterId } = await seedCluster(h, 'deep');
    let deep: unknown = { x: 1 };
    for (let i = 0; i < 800; i++) deep = { a: deep };
    const asJson = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'm1', role: 'worker', patches: [deep] } });
    expect(asJson.status).toBe(400);
    const yaml = '{a: '.repeat(800) + '1' + '}'.repeat(800);
    const asYaml = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'm2', role: 'worker', patches: [yaml] } });
    expect(asYaml.status).toBe(400);
    expect(await count('machines')).toBe(0);
  });

  it('two concurrent creates of one cluster name: one 201, the rest 409', async () => {
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'race' } });
    const body = { tenant: t.body.id, name: 'same', endpoint: 'https://[2001:db8::1]:6443' };
    const results = await Promise.all(Array.from({ length: 4 }, () => h.call('POST', '/v1/clusters', { body })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409]);
  });

  it('a bad cluster request costs no key generation', async () => {
    let generated = 0;
    const h2 = await createHarness({
      patchDeps: (d) => {
        const orig = d.newClusterSecrets;
        d.newClusterSecrets = () => (generated++, orig());
      },
    });
    try {
      const t = await h2.call('POST', '/v1/tenants', { body: { name: 'k' } });
      const bad = [
        { tenant: t.body.id, name: 'Bad Name!', endpoint: 'https://[2001:db8::1]:6443' },
        { tenant: t.body.id, name: 'ok', endpoint: 'https://[2001:db8::1]:6443', patches: ['machine: [unclosed'] },
        { tenant: t.body.id, name: 'ok', endpoint: 'https://[2001:db8::1]:6443', patches: ['{a: '.repeat(100) + '1' + '}'.repeat(100)] },
      ];
      for (const body of bad) expect((await h2.call('POST', '/v1/clusters', { body })).status).toBe(400);
      expect(generated).toBe(0);
    } finally {
      await h2.close();
    }
  });

  it('HEAD on a secret endpoint mints nothing and audits nothing', async () => {
    const { clusterId } = await seedCluster(h, 'head');
    const before = await count('audit');
    for (const p of ['talosconfig', 'kubeconfig']) {
      const res = await h.app.request(`/v1/clusters/${clusterId}/${p}`, { method: 'HEAD', headers: { authorization: `Bearer ${h.adminToken}` } });
      expect(res.status).toBe(405);
    }
    expect(await count('audit')).toBe(before);
    expect((await h.call('GET', `/v1/clusters/${clusterId}/kubeconfig`)).status).toBe(200);
    expect(await count('audit')).toBe(before + 1);
  });
});

describe('one tenant cannot starve others (item 7)', () => {
  it("a tenant's POST /v1/collect storm coalesces into one fleet pass and names nothing of another tenant", async () => {
    const a = await seedCluster(h, 'noisy');
    const b = await seedCluster(h, 'quiet');
    const tokA = (await h.call('POST', `/v1/tenants/${a.tenantId}/tokens`, { body: { name: 'rw' } })).body.token as string;
    // The other tenant asks first; its pass is fleet-wide, and the noisy tenant joins it.
    const tokB = (await h.call('POST', `/v1/tenants/${b.tenantId}/tokens`, { body: { name: 'rw' } })).body.token as string;
    const first = await h.call('POST', '/v1/collect', { token: tokB });
    expect(first.body).toEqual({ queued: true, coalesced: false });
    const answers = await Promise.all(Array.from({ length: 40 }, () => h.call('POST', '/v1/collect', { token: tokA })));
    expect(answers.every((r) => r.status === 202 && r.body.coalesced === true)).toBe(true);
    const text = JSON.stringify(answers.map((r) => r.body));
    expect(text).not.toMatch(/run_|tn_|cl_/);
    const runs = await h.deps.database.client.execute("SELECT params, tenant_id FROM runs WHERE kind = 'collect'");
    expect(runs.rows).toHaveLength(1);
    // The one pass covers every tenant: no tenant scope, so the cron's pass is this pass.
    expect(JSON.parse(String(runs.rows[0]!.params))).toEqual({});
    expect(runs.rows[0]!.tenant_id).toBeNull();
    const { scheduledCollect } = await import('../functions/collect/job.ts');
    expect(await scheduledCollect(h.deps)).toBeUndefined();
  });
});
