import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';

let h: Harness;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => h.close());

async function tenantToken(tenantId: string, scopes?: string[]) {
  const res = await h.call('POST', `/v1/tenants/${tenantId}/tokens`, { body: { name: 'ci', ...(scopes ? { scopes } : {}) } });
  expect(res.status).toBe(201);
  return res.body.token as string;
}

describe('auth', () => {
  it('rejects a missing or wrong token with 401 and a JSON error', async () => {
    expect((await h.call('GET', '/v1/tenants', { token: null })).status).toBe(401);
    const wrong = await h.call('GET', '/v1/tenants', { token: 'rzs_nope' });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe('unauthorized');
  });

  it('keeps only a hash of minted tokens', async () => {
    const { tenantId } = await seedCluster(h);
    const token = await tenantToken(tenantId);
    const rows = await h.deps.database.client.execute('SELECT hash FROM tokens');
    expect(rows.rows.map((r) => r.hash)).not.toContain(token);
    expect((await h.call('GET', '/v1/clusters', { token })).status).toBe(200);
  });

  it('answers 403 to a token without the scope', async () => {
    const { tenantId } = await seedCluster(h);
    const reader = await tenantToken(tenantId, ['read']);
    const res = await h.call('POST', '/v1/clusters', {
      token: reader,
      body: { tenant: tenantId, name: 'c2', talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3', endpoint: 'https://10.0.0.1:6443' },
    });
    expect(res.status).toBe(403);
    expect((await h.call('POST', '/v1/tenants', { token: reader, body: { name: 'x' } })).status).toBe(403);
  });

  it('never lets a tenant token mint a stronger token', async () => {
    const { tenantId } = await seedCluster(h);
    const writer = await tenantToken(tenantId, ['read', 'write']);
    const res = await h.call('POST', `/v1/tenants/${tenantId}/tokens`, { token: writer, body: { name: 'x', scopes: ['secrets:read'] } });
    expect(res.status).toBe(403);
  });
});

describe('tenant isolation', () => {
  it('hides another tenant’s objects behind 404 and lists only its own', async () => {
    const a = await seedCluster(h, 'alpha');
    const b = await seedCluster(h, 'beta');
    const tokenA = await tenantToken(a.tenantId);
    const machineB = await h.call('POST', `/v1/clusters/${b.clusterId}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'metal' } });
    expect(machineB.status).toBe(201);

    const list = await h.call('GET', '/v1/clusters', { token: tokenA });
    expect(list.body.clusters.map((c: { id: string }) => c.id)).toEqual([a.clusterId]);
    expect((await h.call('GET', '/v1/tenants', { token: tokenA })).body.tenants).toHaveLength(1);

    for (const [method, path] of [
      ['GET', `/v1/clusters/${b.clusterId}`],
      ['DELETE', `/v1/clusters/${b.clusterId}`],
      ['GET', `/v1/clusters/${b.clusterId}/machines`],
      ['GET', `/v1/clusters/${b.clusterId}/machines/${machineB.body.id}`],
      ['DELETE', `/v1/clusters/${b.clusterId}/machines/${machineB.body.id}`],
      ['GET', `/v1/tenants/${b.tenantId}`],
      ['GET', `/v1/runs?cluster=${b.clusterId}`],
    ] as const) {
      const res = await h.call(method, path, { token: tokenA });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(JSON.stringify(res.body)).not.toContain('cp1');
    }
    const create = await h.call('POST', '/v1/clusters', {
      token: tokenA,
      body: { tenant: b.tenantId, name: 'sneaky', talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3', endpoint: 'https://10.0.0.1:6443' },
    });
    expect(create.status).toBe(404);
    // Nothing of beta changed.
    expect((await h.call('GET', `/v1/clusters/${b.clusterId}/machines`)).body.machines).toHaveLength(1);
  });
});

describe('clusters and machines', () => {
  it('creates, lists, updates and deletes', async () => {
    const { clusterId } = await seedCluster(h);
    const cluster = await h.call('GET', `/v1/clusters/${clusterId}`);
    expect(cluster.body).toMatchObject({ name: 'c1', talosVersion: 'v1.13.9', endpoint: 'https://[2001:db8::1]:6443' });

    const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, {
      body: { name: 'cp1', role: 'controlplane', provider: 'metal', address: '[2001:db8::10]:50123', installDisk: '/dev/nvme0n1' },
    });
    expect(m.status).toBe(201);
    expect(m.body).toMatchObject({ state: 'new', address: '[2001:db8::10]:50123' });

    const dup = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'cp1', role: 'worker', provider: 'metal' } });
    expect(dup.status).toBe(409);

    const patched = await h.call('PATCH', `/v1/clusters/${clusterId}/machines/${m.body.id}`, { body: { address: '192.0.2.5' } });
    expect(patched.status).toBe(200);
    expect(patched.body.address).toBe('192.0.2.5');

    const refused = await h.call('DELETE', `/v1/clusters/${clusterId}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toMatch(/1 machine/);

    expect((await h.call('DELETE', `/v1/clusters/${clusterId}/machines/${m.body.id}`)).status).toBe(204);
    expect((await h.call('DELETE', `/v1/clusters/${clusterId}`)).status).toBe(204);
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).status).toBe(404);
  });

  it('changes a running cluster\'s Kubernetes version only through an upgrade run', async () => {
    const { clusterId } = await seedCluster(h);
    const before = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { kubernetesVersion: '1.36.2' } });
    expect(before.status, 'before bootstrap it is a setting').toBe(200);
    await h.deps.database.client.execute({ sql: 'UPDATE clusters SET bootstrapped_at = ? WHERE id = ?', args: [Date.now(), clusterId] });
    const refused = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { kubernetesVersion: '1.36.3' } });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('use_upgrade_kubernetes');
    expect(refused.body.error.message).toContain(`/v1/clusters/${clusterId}/upgrade-kubernetes`);
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body.kubernetesVersion).toBe('1.36.2');
    // The dashboard's edit form sends the version unchanged with the other fields.
    const same = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { kubernetesVersion: '1.36.2', endpoint: 'https://[2001:db8::2]:6443' } });
    expect(same.status).toBe(200);
    expect(same.body.endpoint).toBe('https://[2001:db8::2]:6443');
  });

  it('refuses to delete a cluster with an active run', async () => {
    const { clusterId, tenantId } = await seedCluster(h);
    const run = await h.deps.jobs.enqueue({ kind: 'noop', clusterId, tenantId, exclusive: true });
    const res = await h.call('DELETE', `/v1/clusters/${clusterId}`);
    expect(res.status).toBe(409);
    expect(res.body.error.details.activeRun).toBe(run.id);
  });
});

describe('bad input changes nothing', () => {
  const bad: [string, unknown][] = [
    ['unknown field', { name: 'ok', extra: 1 }],
    ['wrong type', { name: 42 }],
    ['path-like name', { name: '../x' }],
    ['empty name', { name: '' }],
    ['300 characters', { name: 'a'.repeat(300) }],
    ['uppercase', { name: 'Home' }],
    ['array body', [{ name: 'x' }]],
  ];
  it.each(bad)('tenant: %s → 400', async (_label, body) => {
    const res = await h.call('POST', '/v1/tenants', { body });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request' });
    expect(typeof res.body.error.message).toBe('string');
    expect((await h.call('GET', '/v1/tenants')).body.tenants).toHaveLength(0);
  });

  it('malformed JSON → 400, not JSON → 415, over 1 MiB → 413', async () => {
    const broken = await h.call('POST', '/v1/tenants', { body: '{"name": ' });
    expect(broken.status).toBe(400);
    expect(broken.body.error.message).toMatch(/not valid JSON/);
    const text = await h.call('POST', '/v1/tenants', { body: 'name=x', headers: { 'content-type': 'text/plain' } });
    expect(text.status).toBe(415);
    const huge = await h.call('POST', '/v1/tenants', { body: JSON.stringify({ name: 'x', pad: 'a'.repeat(1024 * 1024) }) });
    expect(huge.status).toBe(413);
    expect(huge.body.error.code).toBe('body_too_large');
    expect((await h.call('GET', '/v1/tenants')).body.tenants).toHaveLength(0);
  });

  it('machine fields are validated and name the field', async () => {
    const { clusterId } = await seedCluster(h);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ name: 'm', role: 'boss', provider: 'metal' }, /^role:/],
      [{ name: 'm', role: 'worker', provider: 'gcp' }, /^provider:/],
      [{ name: 'm', role: 'worker', provider: 'metal', address: 'http://x' }, /^address:/],
      [{ name: 'm', role: 'worker', provider: 'metal', address: '[2001:db8::1]:99999' }, /^address:/],
      [{ name: 'm', role: 'worker', provider: 'metal', installDisk: 'sda' }, /^installDisk:/],
    ];
    for (const [body, message] of cases) {
      const res = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.message).toMatch(message);
    }
    const patchName = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'm', role: 'worker', provider: 'metal' } });
    const rename = await h.call('PATCH', `/v1/clusters/${clusterId}/machines/${patchName.body.id}`, { body: { name: 'other' } });
    expect(rename.status).toBe(400);
    expect(rename.body.error.message).toMatch(/unknown field "name"/);
    expect((await h.call('GET', `/v1/clusters/${clusterId}/machines`)).body.machines.map((m: { name: string }) => m.name)).toEqual(['m']);
  });

  it('cluster endpoint and versions are validated', async () => {
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'home' } });
    const base = { tenant: t.body.id, name: 'c1', talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3', endpoint: 'https://10.0.0.1:6443' };
    for (const [field, value] of [
      ['endpoint', 'http://10.0.0.1:6443'],
      ['endpoint', 'https://10.0.0.1'],
      ['talosVersion', 'latest'],
      ['kubernetesVersion', '1.x'],
    ] as const) {
      const res = await h.call('POST', '/v1/clusters', { body: { ...base, [field]: value } });
      expect(res.status, `${field}=${value}`).toBe(400);
      expect(res.body.error.message.startsWith(`${field}:`)).toBe(true);
    }
    expect((await h.call('GET', '/v1/clusters')).body.clusters).toHaveLength(0);
  });

  it('refuses a Kubernetes version the cluster\'s Talos does not run, naming the range', async () => {
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'home' } });
    const base = { tenant: t.body.id, name: 'c1', endpoint: 'https://10.0.0.1:6443' };
    for (const [talosVersion, kubernetesVersion, message] of [
      ['v1.13.9', '1.37.0', 'kubernetesVersion: Kubernetes 1.37.0 is too new for Talos v1.13.9 (it runs 1.31 to 1.36)'],
      ['v1.13.9', '1.29.0', 'kubernetesVersion: Kubernetes 1.29.0 is too old for Talos v1.13.9 (it runs 1.31 to 1.36)'],
      ['v1.12.11', '1.36.3', 'kubernetesVersion: Kubernetes 1.36.3 is too new for Talos v1.12.11 (it runs 1.30 to 1.35)'],
    ] as const) {
      const res = await h.call('POST', '/v1/clusters', { body: { ...base, talosVersion, kubernetesVersion } });
      expect(res.status, `${talosVersion} + ${kubernetesVersion}`).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', message });
    }
    // Nothing is checked against a Talos line the table does not know yet, as for upgrades.
    const unknown = await h.call('POST', '/v1/clusters', { body: { ...base, name: 'future', talosVersion: 'v1.99.0', kubernetesVersion: '1.36.3' } });
    expect(unknown.status).toBe(201);
    expect((await h.call('GET', '/v1/clusters')).body.clusters.map((c: { name: string }) => c.name)).toEqual(['future']);
  });

  it('refuses a PATCH to a Kubernetes version the cluster\'s Talos does not run', async () => {
    const { clusterId } = await seedCluster(h);
    const res = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { kubernetesVersion: '1.37.0' } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { supported: { min: '1.31', max: '1.36' } } });
    expect(res.body.error.message).toMatch(/too new for Talos v1\.13\.9 \(it runs 1\.31 to 1\.36\)/);
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body.kubernetesVersion).toBe('1.36.3');
    // A row stored before this rule keeps the version it has, and stays editable.
    await h.deps.database.client.execute({ sql: 'UPDATE clusters SET kubernetes_version = ? WHERE id = ?', args: ['1.37.0', clusterId] });
    const edit = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { kubernetesVersion: '1.37.0', endpoint: 'https://[2001:db8::2]:6443' } });
    expect(edit.status).toBe(200);
  });
});

describe('ops endpoints', () => {
  it('healthz, readyz and metrics', async () => {
    expect((await h.call('GET', '/healthz', { token: null })).status).toBe(200);
    const ready = await h.call('GET', '/readyz', { token: null });
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('ready');
    await h.call('GET', '/v1/tenants');
    expect((await h.call('GET', '/metrics', { token: null })).status).toBe(401);
    const metrics = await h.call('GET', '/metrics');
    expect(metrics.body).toContain('rezus_runs{state="queued"} 0');
    expect(metrics.body).toMatch(/rezus_http_requests_total\{method="GET",route="\/v1\/tenants",status="200"\} 1/);
  });

  it('readyz reports pending migrations', async () => {
    await h.deps.database.client.execute('DELETE FROM __drizzle_migrations');
    const res = await h.call('GET', '/readyz', { token: null });
    expect(res.status).toBe(503);
    expect(res.body.reason).toMatch(/migrations pending/);
  });
});
