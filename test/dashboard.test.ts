import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backupJob } from '../functions/backup/job.ts';
import { backupExecutor } from '../runner/jobs/backup/executor.ts';
import { bind } from '../runner/jobs/registry.ts';
import type { HealthView } from '../functions/dashboard/health-view.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { alertOf, csrfOf, FormClient } from './support/dashboard-client.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';
import { markDelivered } from '../lib/mesh/store.ts';
import { recordStun } from '../lib/mesh/stun-state.ts';
import { createHash } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { clusters, etcdSnapshots } from '../db/schema/index.ts';
import { snapshotSealContext } from '../functions/etcd/job.ts';

let h: Harness;
let worker: Worker | undefined;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => {
  await worker?.stop(0);
  worker = undefined;
  await h.close();
});

async function tenantToken(tenantId: string) {
  const tok = await h.call('POST', `/v1/tenants/${tenantId}/tokens`, { body: { name: 'dash' } });
  return tok.body.token as string;
}

describe('login and session', () => {
  it('sets a sealed HttpOnly SameSite=Strict cookie, Secure only over https', async () => {
    const b = new FormClient(h.app);
    const res = await b.login(h.adminToken);
    expect(res.location).toBe('/');
    const cookie = res.headers.getSetCookie().find((l) => l.startsWith('rezus_session='))!;
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; SameSite=Strict/);
    expect(cookie).toMatch(/; Path=\//);
    expect(cookie).not.toMatch(/Secure/);
    // The token is sealed, not stored in clear (nor in any encoding of it).
    const value = decodeURIComponent(cookie.split(';')[0]!.split('=').slice(1).join('='));
    expect(value).not.toContain(h.adminToken);
    expect(value).not.toContain(Buffer.from(h.adminToken).toString('base64'));
    expect(h.deps.sealer.openText(value, 'session')).toContain(h.adminToken);

    const page = await b.get('/');
    expect(page.status).toBe(200);
    expect(page.text).toContain('<h1>Clusters</h1>');

    const secure = new FormClient(h.app, { origin: 'https://rezus.example' });
    const sres = await secure.login(h.adminToken);
    expect(sres.headers.getSetCookie().find((l) => l.startsWith('rezus_session='))).toMatch(/; Secure/);
  });

  it('rejects a wrong token on the page, and a tampered cookie is no session', async () => {
    const b = new FormClient(h.app);
    const res = await b.submit('/login', '/login', { token: 'rzs_not-a-real-token' });
    expect(res.status).toBe(401);
    expect(alertOf(res.text)).toBe('That token is not valid.');
    expect((await b.get('/')).location).toBe('/login');

    await b.login(h.adminToken);
    const sealed = b.cookies.get('rezus_session')!;
    b.cookies.set('rezus_session', sealed.slice(0, -6) + 'AAAA%3D');
    expect((await b.get('/')).location).toBe('/login');
  });

  it('logout ends the session, and a revoked token logs the browser out', async () => {
    const { tenantId } = await seedCluster(h);
    const tok = await h.call('POST', `/v1/tenants/${tenantId}/tokens`, { body: { name: 'dash' } });
    const b = new FormClient(h.app);
    await b.login(tok.body.token);
    expect((await b.get('/')).status).toBe(200);
    expect((await h.call('DELETE', `/v1/tenants/${tenantId}/tokens/${tok.body.id}`)).status).toBe(204);
    expect((await b.get('/')).location).toBe('/login');

    await b.login(h.adminToken);
    const out = await b.submit('/', '/logout', {});
    expect(out.location).toBe('/login');
    expect((await b.get('/runs')).location).toBe('/login');
  });
});

describe('pages and scoping', () => {
  it('the admin sees every cluster; a tenant token only its own, and another tenant’s cluster is not found', async () => {
    const a = await seedCluster(h, 'alpha');
    const bTenant = await h.call('POST', '/v1/tenants', { body: { name: 'bravo' } });
    const bCluster = await h.call('POST', '/v1/clusters', {
      body: { tenant: bTenant.body.id, name: 'bravo-c', talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3', endpoint: 'https://[2001:db8::2]:6443' },
    });

    const admin = new FormClient(h.app);
    await admin.login(h.adminToken);
    const list = await admin.get('/');
    expect(list.text).toContain(`href="/clusters/${a.clusterId}"`);
    expect(list.text).toContain(`href="/clusters/${bCluster.body.id}"`);
    // No health data source yet: the rollup says unknown.
    expect(list.text).toContain('<span class="badge unknown">unknown</span>');

    const tenant = new FormClient(h.app);
    await tenant.login(await tenantToken(a.tenantId));
    const mine = await tenant.get('/');
    expect(mine.status).toBe(200);
    expect(mine.text).toContain(`href="/clusters/${a.clusterId}"`);
    expect(mine.text).not.toContain(bCluster.body.id);
    expect(mine.text).not.toContain('bravo');
    const theirs = await tenant.get(`/clusters/${bCluster.body.id}`);
    expect(theirs.status).toBe(404);
    expect(theirs.text).toContain('<h1>Page not found</h1>');
    expect(theirs.text).toContain('This cluster does not exist, or this token cannot see it.');
    expect(theirs.text).not.toContain('bravo');
    expect((await tenant.get(`/clusters/${a.clusterId}`)).status).toBe(200);
    // The tenant page offers no tenant creation, and the runs page no backup button.
    expect((await tenant.get('/tenants')).text).not.toContain('Create tenant');
    expect((await tenant.get('/runs')).text).not.toContain('Start backup');
  });

  it('renders the cluster page with machines, state, Talos version and a sparkline area', async () => {
    const { clusterId } = await seedCluster(h);
    await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'cp-1', role: 'controlplane', provider: 'metal', address: '[2001:db8::10]:50000' } });
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const page = await b.get(`/clusters/${clusterId}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('cp-1');
    expect(page.text).toContain('[2001:db8::10]:50000');
    expect(page.text).toContain('<span class="badge new">new</span>');
    // No samples yet: the usage cell links to the machine's charts instead of drawing empty lines.
    expect(page.text).toMatch(/<a href="\/clusters\/cl_[a-z2-7]+\/machines\/m_[a-z2-7]+" class="usage">charts<\/a>/);
    expect(page.text).toContain('never');
  });

  it('shows the mesh: off, or what nodes dial, each peer, the nodes waiting for a re-push and the STUN advice', async () => {
    const { clusterId, tenantId } = await seedCluster(h);
    const add = async (name: string) => (await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name, role: 'controlplane', provider: 'metal', address: '192.0.2.10' } })).body.id as string;
    const cp1 = await add('cp-1');
    await add('cp-2');
    const b = new FormClient(h.app);
    await b.login(await tenantToken(tenantId));
    const page = `/clusters/${clusterId}`;
    const off = await b.get(page);
    expect(off.text).toContain('id="mesh-off"');
    expect(off.text).not.toContain('id="mesh-peers"');

    // Turned on from the page: the API's refusal stands under the field, with what was typed.
    const refused = await b.submit(page, `${page}/mesh`, { endpoint: '127.0.0.1:51820' });
    expect(refused.status).toBe(400);
    expect(refused.text).toMatch(/<p class="field-error" id="mesh-endpoint-error" role="alert">127\.0\.0\.1 is a loopback address: nodes dial the endpoint from their own network<\/p>/);
    expect(refused.text).toContain('value="127.0.0.1:51820"');
    expect((await h.call('GET', `/v1/clusters/${clusterId}/mesh`)).body.enabled).toBe(false);
    const on1 = await b.submit(page, `${page}/mesh`, { endpoint: '203.0.113.7:51820' });
    expect(on1.location).toBe(page);
    expect((await h.call('GET', `/v1/clusters/${clusterId}/mesh`)).body).toMatchObject({ enabled: true, endpoint: '203.0.113.7:51820' });
    // cp-1 holds a config from before the endpoint moved; cp-2 has had none with the mesh yet.
    await markDelivered(h.deps.db, cp1, '198.51.100.5:51820');
    const on = (await b.get(`/clusters/${clusterId}`)).text;
    expect(on).not.toContain('id="mesh-off"');
    const facts = on.slice(on.indexOf('id="mesh-facts"'), on.indexOf('id="mesh-peers"'));
    expect(facts).toContain('203.0.113.7:51820');
    expect(facts).toMatch(/<dd id="mesh-pending">cp-1 still dials an old endpoint/);
    expect(facts).not.toContain('id="mesh-stun"');
    const peers = on.slice(on.indexOf('id="mesh-peers"'));
    const row = (name: string) => peers.slice(peers.indexOf(`<td data-label="Machine">${name}</td>`)).split('</tr>')[0]!;
    expect(row('cp-1')).toContain('100.64.0.2');
    expect(row('cp-1')).toContain('(holds 198.51.100.5:51820)');
    expect(row('cp-2')).toContain('(holds no mesh config yet)');
    expect(row('cp-2')).toContain('<span class="badge none">no handshake</span>');
    expect(row('cp-2')).toContain('never');

    // The waiting node is re-pushed from the page: the run opens.
    const repush = await b.submit(page, `${page}/mesh/repush`, {});
    expect(repush.location).toMatch(/^\/runs\/run_/);
    const runs = (await h.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs as Array<{ id: string; kind: string }>;
    expect(runs.map((r) => r.kind)).toEqual(['mesh-repush']);
    // Busy with it, a second re-push is refused where the form is.
    const busy = await b.submit(page, `${page}/mesh/repush`, {});
    expect(busy.status).toBe(409);
    expect(busy.text).toContain('id="mesh-form"');
    expect((await h.call('POST', `/v1/runs/${runs[0]!.id}/cancel`)).status).toBe(202);

    // Following STUN, with a check that saw the hub on loopback: the advice says why nothing moved.
    h.deps.settings.meshStunServers = [{ host: 'stun1.example.net', port: 3478 }, { host: 'stun2.example.net', port: 3478 }];
    expect((await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: 'stun' } })).status).toBe(200);
    await recordStun(h.deps.db, { mapping: 'none', publicAddress: '127.0.0.1', endpoint: null, observed: [], at: Date.now() });
    const stun = (await b.get(`/clusters/${clusterId}`)).text;
    expect(stun).toContain('learned with STUN');
    expect(stun).toMatch(/<dd id="mesh-stun">the STUN servers see the hub as 127\.0\.0\.1, a loopback address nodes elsewhere cannot dial/);
    expect(stun).toContain('id="mesh-endpoint" name="endpoint" type="text" value="stun"');

    // Turned off from the page.
    expect((await b.submit(page, `${page}/mesh/off`, {})).location).toBe(page);
    expect((await h.call('GET', `/v1/clusters/${clusterId}/mesh`)).body.enabled).toBe(false);
    expect((await b.get(page)).text).toContain('id="mesh-off"');
  });

  it('etcd and whole-cluster pushes from the page: push every metal machine, take a snapshot, defragment, download and restore one', async () => {
    const { clusterId } = await seedCluster(h);
    for (const name of ['cp-1', 'cp-2']) await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name, role: 'controlplane', provider: 'metal', address: '192.0.2.10' } });
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const page = `/clusters/${clusterId}`;
    const runs = async () => (await h.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs as Array<{ id: string; kind: string; params: Record<string, unknown> }>;
    const cancelAll = async () => {
      for (const r of await runs()) await h.call('POST', `/v1/runs/${r.id}/cancel`);
    };

    const before = (await b.get(page)).text;
    expect(before).toContain('Snapshots and defragmentation start once the cluster is bootstrapped.');
    expect(before).not.toContain('id="etcd-take"');
    expect(before).toContain('id="etcd-none"');
    // One run for every metal machine, in maintenance mode, bootstrapping the first control plane.
    const pushed = await b.submit(page, `${page}/push-config`, { insecure: 'on', bootstrap: 'on' });
    expect(pushed.location).toMatch(/^\/runs\/run_/);
    const [push] = await runs();
    expect(push!.kind).toBe('push-cluster');
    expect(push!.params.machines).toHaveLength(2);
    expect(push!.params.bootstrap).toBeDefined();
    await cancelAll();

    await h.deps.db.update(clusters).set({ bootstrappedAt: Date.now() }).where(eq(clusters.id, clusterId));
    const after = (await b.get(page)).text;
    expect(after).not.toContain('id="cp-bootstrap"');
    expect((await b.submit(page, `${page}/etcd-snapshots`, {})).location).toMatch(/^\/runs\/run_/);
    expect((await runs()).map((r) => r.kind)).toContain('etcd-snapshot');
    // Busy with it: a defragmentation is refused where the etcd section is.
    const busy = await b.submit(page, `${page}/etcd-defrag`, {});
    expect(busy.status).toBe(409);
    expect(busy.text).toMatch(/<p class="field-error" role="alert" id="etcd-error">/);
    await cancelAll();
    expect((await b.submit(page, `${page}/etcd-defrag`, {})).location).toMatch(/^\/runs\/run_/);
    await cancelAll();

    // A stored snapshot is listed, downloads byte for byte through the page, and restores onto a control plane.
    const file = Buffer.from('etcd-db'.padEnd(1000, '.'));
    await h.deps.db.insert(etcdSnapshots).values({
      id: 'esnap_dash', clusterId, createdAt: Date.now(), machineName: 'cp-1', sizeBytes: file.length, revision: '4242', sha256: createHash('sha256').update(file).digest('hex'),
      trigger: 'manual', runId: null, sealed: h.deps.sealer.seal(file, snapshotSealContext(clusterId, 'esnap_dash')),
    });
    const listed = (await b.get(page)).text;
    expect(listed).toContain('id="etcd-snapshots"');
    expect(listed).toContain('4242');
    expect(listed).toContain(`href="${page}/etcd-snapshots/esnap_dash" download`);
    const res = await h.app.request(`http://localhost${page}/etcd-snapshots/esnap_dash`, { headers: { cookie: [...b.cookies].map(([k, v]) => `${k}=${v}`).join("; ") } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-etcd-revision')).toBe('4242');
    expect(Buffer.from(await res.arrayBuffer()).equals(file)).toBe(true);
    expect((await b.submit(page, `${page}/etcd-snapshots/esnap_dash/restore`, { machine: 'cp-2' })).location).toMatch(/^\/runs\/run_/);
    expect((await runs()).find((r) => r.kind === 'etcd-restore')?.params).toEqual({ snapshot: 'esnap_dash', machine: (await h.call('GET', `/v1/clusters/${clusterId}/machines`)).body.machines.find((m: { name: string }) => m.name === 'cp-2').id });
  });

  it('shows what a health view reports: the rollup, last seen and the samples as a sparkline', async () => {
    await h.close();
    const view: HealthView = {
      async report(_ctx, clusterId) {
        const machines = await h.call('GET', `/v1/clusters/${clusterId}/machines`);
        return {
          cluster: { status: 'degraded', summary: '1 of 2 nodes ready' },
          machines: { [machines.body.machines[0].id]: { status: 'healthy', lastSeen: Date.UTC(2026, 0, 2, 3, 4, 5), samples: [1, 3, 2], samplesLabel: 'CPU' } },
        };
      },
    };
    h = await createHarness({ app: { dashboard: { healthView: view } } });
    const { clusterId } = await seedCluster(h);
    await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'w-1', role: 'worker', provider: 'metal' } });
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const list = await b.get('/');
    expect(list.text).toContain('<span class="badge degraded">degraded</span>');
    expect(list.text).toContain('1 of 2 nodes ready');
    const page = await b.get(`/clusters/${clusterId}`);
    expect(page.text).toContain('2026-01-02 03:04:05 UTC');
    // The newest sample, in its unit (CPU is a busy fraction).
    expect(page.text).toContain('class="usage">CPU 200 %</a>');
  });

  it('a failing health view leaves the page up with unknown health', async () => {
    await h.close();
    h = await createHarness({ app: { dashboard: { healthView: { report: async () => { throw new Error('collector down'); } } } } });
    await seedCluster(h);
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const list = await b.get('/');
    expect(list.status).toBe(200);
    expect(list.text).toContain('<span class="badge unknown">unknown</span>');
  });
});

describe('CSRF', () => {
  it('rejects a state-changing form without, with a wrong, or with another session’s token, and changes nothing', async () => {
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const other = new FormClient(h.app);
    await other.login(h.adminToken);
    const othersToken = csrfOf((await other.get('/tenants')).text);

    const none = await b.post('/tenants', { name: 'no-token' });
    expect(none.status).toBe(403);
    expect(none.text).toContain('Form rejected');
    const wrong = await b.post('/tenants', { name: 'wrong-token', _csrf: 'x'.repeat(32) });
    expect(wrong.status).toBe(403);
    const foreign = await b.post('/tenants', { name: 'foreign-token', _csrf: othersToken });
    expect(foreign.status).toBe(403);
    expect((await b.post('/backups', {})).status).toBe(403);
    expect((await b.post('/logout', {})).status).toBe(403);
    expect((await h.call('GET', '/v1/tenants')).body.tenants).toEqual([]);

    const ok = await b.submit('/tenants', '/tenants', { name: 'with-token' });
    expect(ok.status).toBe(303);
    expect((await h.call('GET', '/v1/tenants')).body.tenants.map((t: { name: string }) => t.name)).toEqual(['with-token']);
  });

  it('protects the login form too', async () => {
    const b = new FormClient(h.app);
    const res = await b.post('/login', { token: h.adminToken });
    expect(res.status).toBe(403);
    expect((await b.get('/')).location).toBe('/login');
  });

  it('rotates the CSRF secret at login', async () => {
    const b = new FormClient(h.app);
    const before = csrfOf((await b.get('/login')).text);
    await b.login(h.adminToken);
    const after = csrfOf((await b.get('/tenants')).text);
    expect(after).not.toBe(before);
    expect((await b.post('/tenants', { name: 'stale', _csrf: before })).status).toBe(403);
  });
});

describe('forms go through the API', () => {
  it('creates a tenant, a cluster and a machine, and lands on the new cluster', async () => {
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    expect((await b.submit('/tenants', '/tenants', { name: 'home' })).location).toBe('/tenants');
    const tenant = (await h.call('GET', '/v1/tenants')).body.tenants[0];
    const created = await b.submit('/', '/clusters', {
      tenant: tenant.id,
      name: 'lab',
      talosVersion: '1.13.9',
      kubernetesVersion: 'v1.36.3',
      endpoint: 'https://[2001:db8::1]:6443',
    });
    expect(created.status).toBe(303);
    const cluster = (await h.call('GET', '/v1/clusters')).body.clusters[0];
    expect(created.location).toBe(`/clusters/${cluster.id}`);
    // Normalised by the API handler, not the form: one implementation.
    expect(cluster).toMatchObject({ name: 'lab', talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3' });

    const m = await b.submit(`/clusters/${cluster.id}`, `/clusters/${cluster.id}/machines`, {
      name: 'node-1',
      role: 'worker',
      provider: 'metal',
      address: '192.0.2.10',
      installDisk: '',
    });
    expect(m.location).toBe(`/clusters/${cluster.id}`);
    const machines = (await h.call('GET', `/v1/clusters/${cluster.id}/machines`)).body.machines;
    expect(machines).toHaveLength(1);
    expect(machines[0]).toMatchObject({ name: 'node-1', role: 'worker', provider: 'metal', address: '192.0.2.10', installDisk: null });

    // Audit attributes the deletion-free actions to the logged-in token like any API call would.
    const audit = await h.call('GET', '/v1/audit');
    expect(audit.status).toBe(200);
  });

  it('shows the API’s error message and keeps what was typed', async () => {
    const { tenantId, clusterId } = await seedCluster(h);
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const bad = await b.submit('/', '/clusters', { tenant: tenantId, name: 'lab', talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3', endpoint: 'http://nope' });
    expect(bad.status).toBe(400);
    // The complaint stands under the field it is about.
    expect(bad.text).toMatch(/<input id="cl-endpoint"[^>]*aria-invalid="true" aria-describedby="cl-endpoint-error"\/><p class="field-error" id="cl-endpoint-error" role="alert">must be https:\/\/host:port \(IPv6 as \[addr\]\)<\/p>/);
    expect(bad.text).toContain('value="http://nope"');

    const dup = await b.submit('/tenants', '/tenants', { name: 'home' });
    expect(dup.status).toBe(409);
    expect(alertOf(dup.text)).toBe('a tenant named "home" exists');

    const machine = await b.submit(`/clusters/${clusterId}`, `/clusters/${clusterId}/machines`, { name: 'Bad_Name', role: 'worker', provider: 'metal' });
    expect(machine.status).toBe(400);
    expect(alertOf(machine.text)).toMatch(/^must be a DNS label/);
    expect(machine.text).toContain('id="m-name-error"');
    expect(machine.text).toContain('value="Bad_Name"');

    const tenant = new FormClient(h.app);
    await tenant.login(await tenantToken(tenantId));
    const denied = await tenant.submit('/tenants', '/tenants', { name: 'sneaky' });
    expect(denied.status).toBe(403);
    expect(alertOf(denied.text)).toBe('this needs an admin token');
    expect((await h.call('GET', '/v1/tenants')).body.tenants).toHaveLength(1);
  });

  it('starts a backup, shows its run page, follows its log through the session-authenticated stream, and cancel works', async () => {
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const started = await b.submit('/runs', '/backups', {});
    expect(started.status).toBe(303);
    const runId = /^\/runs\/(run_[a-z2-7]+)$/.exec(started.location!)![1]!;
    const queued = await b.get(`/runs/${runId}`);
    expect(queued.text).toContain('<span class="badge queued" id="run-state">queued</span>');
    expect(queued.text).toContain(`data-stream="/runs/${runId}/events"`);
    expect(queued.text).toContain('id="cancel-run"');

    worker = createWorker({ deps: h.deps, executors: Object.fromEntries([bind(backupJob, backupExecutor)]), workerId: 't', leaseMs: 3000, concurrency: 1, pollMs: 20 });
    worker.start();
    const stream = await b.get(`/runs/${runId}/events?after=1`, { accept: 'text/event-stream' });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toMatch(/text\/event-stream/);
    const events = stream.text.split('\n\n').filter((x) => x.includes('event: run-event')).map((x) => JSON.parse(/data: (.*)/.exec(x)![1]!));
    expect(events.map((e) => e.type)).toEqual(['started', 'backup.start', 'backup.done', 'succeeded']);
    expect(stream.text).toMatch(/event: end\ndata: \{[^\n]*"state":"succeeded"/);

    const done = await b.get(`/runs/${runId}`);
    expect(done.text).toContain('data-done="1"');
    expect(done.text).not.toContain('id="cancel-run"');
    expect(done.text).toContain('backup written');

    // Cancelling a finished run is the API's call; a queued one is cancelled at once.
    await worker.stop(0);
    worker = undefined;
    const second = await b.submit('/runs', '/backups', {});
    const secondId = second.location!.split('/').pop()!;
    const cancel = await b.submit(`/runs/${secondId}`, `/runs/${secondId}/cancel`, {});
    expect(cancel.location).toBe(`/runs/${secondId}`);
    expect((await h.call('GET', `/v1/runs/${secondId}`)).body.state).toBe('canceled');
  });

  it('the stream proxy needs a session, and shows nothing of another tenant', async () => {
    const run = await h.deps.jobs.enqueue({ kind: 'backup', exclusive: false });
    const anon = new FormClient(h.app);
    expect((await anon.get(`/runs/${run.id}/events`, { accept: 'text/event-stream' })).location).toBe('/login');
    const { tenantId } = await seedCluster(h);
    const tenant = new FormClient(h.app);
    await tenant.login(await tenantToken(tenantId));
    const res = await tenant.get(`/runs/${run.id}/events`, { accept: 'text/event-stream' });
    expect(res.status).toBe(404);
    expect((await tenant.get(`/runs/${run.id}`)).status).toBe(404);
  });

  it('the plan form queues a provision run through the same API and opens its page', async () => {
    const { clusterId } = await seedCluster(h);
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const plan = await b.submit(`/clusters/${clusterId}`, `/clusters/${clusterId}/provision`, { mode: 'plan' });
    expect(plan.status).toBe(303);
    const runs = (await h.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs;
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ kind: 'provision', params: { mode: 'plan', destroy: false } });
    expect(plan.location).toBe(`/runs/${runs[0].id}`);
    // A second one while the first is queued shows the API's conflict on the cluster page.
    const again = await b.submit(`/clusters/${clusterId}`, `/clusters/${clusterId}/provision`, { mode: 'apply' });
    expect(again.status).toBe(409);
    expect(alertOf(again.text)).toMatch(/active run/);
  });
});

describe('a long run log', () => {
  /**
   * A finished run of `count` events, as the queue writes them: queued, started, tofu's lines
   * (one of them markup, one the diagnostic that explains the failure), then the failure.
   */
  async function longRun(count: number, opts: { tenantId?: string; state?: 'failed' | 'succeeded' } = {}) {
    const run = await h.deps.jobs.enqueue({ kind: 'provision', exclusive: false, tenantId: opts.tenantId, params: { mode: 'apply' } });
    await h.deps.jobs.claim({ workerId: 'long', leaseMs: 60_000, kinds: ['provision'] });
    const lines = Array.from({ length: count - 3 }, (_, i) => ({ type: 'tofu.log', message: `line ${i + 3}` }));
    lines[count - 4] = { type: 'tofu.diagnostic', level: 'error', message: 'Error: <img src=x onerror=alert(1)>', data: { severity: 'error', summary: 'Quota <b>exceeded</b>' } } as never;
    for (let i = 0; i < lines.length; i += 500) expect(await h.deps.jobs.appendEvents(run.id, lines.slice(i, i + 500))).toBe(true);
    const failed = opts.state !== 'succeeded';
    await h.deps.jobs.finish(run.id, 'long', failed ? { state: 'failed', error: 'terraform apply failed (exit 1)' } : { state: 'succeeded' });
    return run.id;
  }
  const seqs = (html: string) => [...html.matchAll(/<li class="\w+" data-seq="(\d+)"/g)].map((m) => Number(m[1]));

  it('renders the first and the last page of a finished run, the count and the gap between; markup stays text', async () => {
    const runId = await longRun(2500);
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const page = await b.get(`/runs/${runId}`);
    expect(page.status).toBe(200);
    const shown = seqs(page.text);
    expect(shown).toEqual([...Array.from({ length: 1000 }, (_, i) => i + 1), ...Array.from({ length: 1000 }, (_, i) => i + 1501)]);
    expect(page.text).toContain('<span id="log-count" aria-live="polite">Showing 2,000 of 2,500 events.</span> <a href="#log-end">Go to the last event</a>');
    expect(page.text).toMatch(/<li class="log-gap" id="log-gap" data-after="1000" data-before="1501" data-page="1000"><span id="log-gap-text">500 events not shown\.<\/span>/);
    // The buttons need the page script; without it they stay hidden and the count says what is missing.
    expect(page.text).toContain('<button type="button" class="secondary" id="log-more" aria-describedby="log-gap-text" hidden="">Show 500 more</button>');
    expect(page.text).toContain('<button type="button" class="secondary" id="log-earlier" aria-describedby="log-gap-text" hidden="">Show 500 earlier</button>');
    expect(page.text).toContain('<li class="error" data-seq="2500" id="log-end">');
    expect(page.text).toContain('run failed: terraform apply failed (exit 1)');
    expect(page.text).toContain('data-total="2500"');
    expect(page.text).toContain('data-scroll="end"');
    // The diagnostic at the end of the log explains the failure at the top of the page.
    expect(page.text).toContain('<dd id="run-error">Quota &lt;b&gt;exceeded&lt;/b&gt;</dd>');
    expect(page.text).toContain('<span class="msg">Error: &lt;img src=x onerror=alert(1)&gt;</span>');
    expect(page.text).not.toContain('<img src=x');
    expect(page.text).not.toContain('<b>exceeded');
    const outcome = await b.get(`/runs/${runId}?part=outcome`);
    expect(outcome.text).toContain('<dd id="run-error">Quota &lt;b&gt;exceeded&lt;/b&gt;</dd>');
  });

  it('a log of more than one page whose ends meet shows every event; a short or live one shows no gap', async () => {
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const meets = await b.get(`/runs/${await longRun(1500, { state: 'succeeded' })}`);
    expect(seqs(meets.text)).toEqual(Array.from({ length: 1500 }, (_, i) => i + 1));
    expect(meets.text).toContain('<span id="log-count" aria-live="polite">Showing all 1,500 events.</span>');
    expect(meets.text).not.toContain('id="log-gap"');
    expect(meets.text).not.toContain('data-scroll');

    const short = await b.get(`/runs/${await longRun(4)}`);
    expect(seqs(short.text)).toEqual([1, 2, 3, 4]);
    expect(short.text).toContain('<span id="log-count" aria-live="polite">Showing all 4 events.</span></p>');

    const queued = await h.deps.jobs.enqueue({ kind: 'backup', exclusive: false });
    const live = await b.get(`/runs/${queued.id}`);
    expect(live.text).not.toContain('id="log-count"');
    expect(live.text).not.toContain('data-total');
  });

  it('relays a page of the log as JSON for the session, and shows nothing of another tenant', async () => {
    const runId = await longRun(2500);
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const res = await b.get(`/runs/${runId}/events?after=1000&limit=500`, { accept: 'application/json' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = JSON.parse(res.text);
    expect(body.events.map((e: { seq: number }) => e.seq)).toEqual(Array.from({ length: 500 }, (_, i) => i + 1001));
    expect(body).toMatchObject({ more: true, next: 1500 });
    // The API's own checks answer for the relay.
    expect((await b.get(`/runs/${runId}/events?after=-1`, { accept: 'application/json' })).status).toBe(400);

    const anon = new FormClient(h.app);
    expect((await anon.get(`/runs/${runId}/events?after=1000`, { accept: 'application/json' })).location).toBe('/login');
    const { tenantId } = await seedCluster(h);
    const tenant = new FormClient(h.app);
    await tenant.login(await tenantToken(tenantId));
    expect((await tenant.get(`/runs/${runId}/events?after=1000`, { accept: 'application/json' })).status).toBe(404);
  });
});
