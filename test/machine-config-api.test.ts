import { parse, parseAllDocuments } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { validateConfigDocuments } from '../lib/talos/schema.ts';
import { opensslVerify } from './support/openssl.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';

let h: Harness;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => h.close());

const b64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');

async function addMachine(clusterId: string, body: Record<string, unknown>) {
  const res = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

describe('cluster secrets and configs over the API', () => {
  it('stores secrets sealed and renders a valid, deterministic config per machine', async () => {
    const { clusterId } = await seedCluster(h, 'home', { patches: [{ machine: { sysctls: { 'net.core.somaxconn': '1024' } } }] });
    const row = await h.deps.database.client.execute({ sql: 'SELECT secrets_sealed FROM clusters WHERE id = ?', args: [clusterId] });
    expect(String(row.rows[0]!.secrets_sealed)).toMatch(/^v1:/);
    expect(String(row.rows[0]!.secrets_sealed)).not.toContain('PRIVATE KEY');

    const cp = await addMachine(clusterId, { name: 'cp1', role: 'controlplane', provider: 'metal', address: '[2001:db8::10]:50000', installDisk: '/dev/nvme0n1', patches: ['machine:\n  sysctls:\n    net.core.somaxconn: "65535"\n'] });
    const res = await h.call('GET', `/v1/clusters/${clusterId}/machines/${cp.id}/config`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/application\/yaml/);
    const text = res.body as string;
    expect(validateConfigDocuments(text)).toEqual([]);
    const v1 = parseAllDocuments(text).map((d) => d.toJS()).find((d) => d.version === 'v1alpha1');
    expect(v1.machine.type).toBe('controlplane');
    expect(v1.machine.install.disk).toBe('/dev/nvme0n1');
    expect(v1.machine.certSANs).toContain('2001:db8::10');
    // machine patch wins over the cluster patch
    expect(v1.machine.sysctls['net.core.somaxconn']).toBe('65535');
    expect((await h.call('GET', `/v1/clusters/${clusterId}/machines/${cp.id}/config`)).body).toBe(text);
  });

  it('rejects a patch that breaks the schema, naming the path, and stores nothing', async () => {
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'home' } });
    const bad = await h.call('POST', '/v1/clusters', {
      body: { tenant: t.body.id, name: 'c1', endpoint: 'https://10.0.0.1:6443', patches: [{ machine: { install: { disk: 42 } } }] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/machine\.install\.disk/);
    expect((await h.call('GET', '/v1/clusters')).body.clusters).toHaveLength(0);

    const { clusterId } = await seedCluster(h, 'other');
    const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, {
      body: { name: 'w1', role: 'worker', provider: 'metal', patches: [{ machine: { kubelet: { image: ['x'] } } }] },
    });
    expect(m.status).toBe(400);
    expect(m.body.error.message).toMatch(/machine\.kubelet\.image/);
    expect((await h.call('GET', `/v1/clusters/${clusterId}/machines`)).body.machines).toHaveLength(0);
  });

  it('rejects overlapping subnets and a relative disk, naming the field', async () => {
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'home' } });
    const base = { tenant: t.body.id, name: 'c1', endpoint: 'https://10.0.0.1:6443' };
    const overlap = await h.call('POST', '/v1/clusters', { body: { ...base, podSubnets: ['10.0.0.0/8'], serviceSubnets: ['10.96.0.0/12'] } });
    expect(overlap.status).toBe(400);
    expect(overlap.body.error.message).toMatch(/^serviceSubnets\.0: overlaps/);
    const disk = await h.call('POST', '/v1/clusters', { body: { ...base, installDisk: 'dev/sda' } });
    expect(disk.status).toBe(400);
    expect(disk.body.error.message).toMatch(/^installDisk:/);
    const dual = await h.call('POST', '/v1/clusters', { body: { ...base, podSubnets: ['10.244.0.0/16', 'fd00:10:244::/56'], serviceSubnets: ['10.96.0.0/12', 'fd00:10:96::/112'] } });
    expect(dual.status).toBe(201);
  });

  it('issues talosconfig and kubeconfig with admin certs from the right CA, audited', async () => {
    const { clusterId } = await seedCluster(h);
    await addMachine(clusterId, { name: 'cp1', role: 'controlplane', provider: 'metal', address: '2001:db8::10' });
    const secrets = await h.deps.newClusterSecrets();

    const tc = await h.call('GET', `/v1/clusters/${clusterId}/talosconfig`);
    expect(tc.status).toBe(200);
    const talosconfig = parse(tc.body as string);
    const ctx = talosconfig.contexts[talosconfig.context];
    expect(ctx.endpoints).toEqual(['2001:db8::10']);
    expect((await opensslVerify(secrets.certs.os.certPem, b64(ctx.crt))).ok).toBe(true);
    expect((await opensslVerify(secrets.certs.k8s.certPem, b64(ctx.crt))).ok).toBe(false);

    const kc = await h.call('GET', `/v1/clusters/${clusterId}/kubeconfig`);
    const kubeconfig = parse(kc.body as string);
    expect(kubeconfig.clusters[0].cluster.server).toBe('https://[2001:db8::1]:6443');
    expect((await opensslVerify(secrets.certs.k8s.certPem, b64(kubeconfig.users[0].user['client-certificate-data']))).ok).toBe(true);

    const audit = await h.call('GET', '/v1/audit');
    const actions = audit.body.entries.map((e: { action: string }) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['secrets.talosconfig', 'secrets.kubeconfig']));
    expect(JSON.stringify(audit.body)).not.toContain('PRIVATE');
  });

  it('writes talosconfig nodes as bare hosts (apid refuses a target with a port), endpoints as given', async () => {
    const { clusterId } = await seedCluster(h);
    await addMachine(clusterId, { name: 'cp1', role: 'controlplane', provider: 'metal', address: '[2001:db8::10]:50000' });
    await addMachine(clusterId, { name: 'w1', role: 'worker', provider: 'metal', address: '192.0.2.7:50001' });
    await addMachine(clusterId, { name: 'w2', role: 'worker', provider: 'metal', address: '2001:db8::12' });
    const tc = await h.call('GET', `/v1/clusters/${clusterId}/talosconfig`);
    expect(tc.status).toBe(200);
    const talosconfig = parse(tc.body as string);
    const ctx = talosconfig.contexts[talosconfig.context];
    expect(ctx.nodes).toEqual(['2001:db8::10', '192.0.2.7', '2001:db8::12']);
    expect(ctx.endpoints).toEqual(['[2001:db8::10]:50000']);
  });

  it('gives secrets only to the admin or a token with secrets:read', async () => {
    const { clusterId, tenantId } = await seedCluster(h);
    const plain = (await h.call('POST', `/v1/tenants/${tenantId}/tokens`, { body: { name: 'rw' } })).body.token;
    const reader = (await h.call('POST', `/v1/tenants/${tenantId}/tokens`, { body: { name: 'sec', scopes: ['read', 'secrets:read'] } })).body.token;
    expect((await h.call('GET', `/v1/clusters/${clusterId}/kubeconfig`, { token: plain })).status).toBe(403);
    // the scope check must not leak onto the rest of /v1/clusters
    expect((await h.call('GET', `/v1/clusters/${clusterId}`, { token: plain })).status).toBe(200);
    expect((await h.call('GET', `/v1/clusters/${clusterId}/kubeconfig`, { token: reader })).status).toBe(200);
    const other = await seedCluster(h, 'beta');
    expect((await h.call('GET', `/v1/clusters/${other.clusterId}/kubeconfig`, { token: reader })).status).toBe(404);
    const tenantAudit = await h.call('GET', '/v1/audit', { token: reader });
    expect(tenantAudit.body.entries.every((e: { tenantId: string }) => e.tenantId === tenantId)).toBe(true);
  });

  it('PATCH changes settings, keeps what it does not name, and refuses a patch that breaks a machine', async () => {
    const { clusterId } = await seedCluster(h, 'home', { kubernetesVersion: '1.35.1' });
    const cp = await addMachine(clusterId, { name: 'cp1', role: 'controlplane', provider: 'metal' });
    const ok = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { patches: [{ machine: { sysctls: { 'vm.swappiness': '10' } } }] } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.kubernetesVersion).toBe('1.35.1');
    expect(ok.body.endpoint).toBe('https://[2001:db8::1]:6443');
    const config = (await h.call('GET', `/v1/clusters/${clusterId}/machines/${cp.id}/config`)).body as string;
    expect(config).toContain('vm.swappiness');

    const bad = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { patches: [{ machine: { install: { disk: false } } }] } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/machine\.install\.disk/);
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body.settings.patches).toEqual([{ machine: { sysctls: { 'vm.swappiness': '10' } } }]);
    expect((await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { talosVersion: 'v1.14.0' } })).status).toBe(400);
  });
});
