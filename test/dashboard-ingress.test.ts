import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import type { AppEnv, Principal } from '../functions/context.ts';
import { dashboardRoutes } from '../functions/dashboard/routes.tsx';
import { DISPATCH_PRINCIPAL } from '../functions/auth.ts';
import { alertOf, csrfOf, FormClient } from './support/dashboard-client.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';

let h: Harness;
afterEach(async () => {
  await h.close();
});

const INGRESS = '/api/hassio_ingress/Zk3x-Q_9aB';
/** Bindings as @hono/node-server passes them: getConnInfo reads the socket's peer from here. */
const fromPeer = (remoteAddress: string) => ({ incoming: { socket: { remoteAddress, remotePort: 40000, remoteFamily: 'IPv4' } } });

async function ingressHarness(trust: boolean) {
  h = await createHarness({ patchDeps: (d) => void (d.settings.trustIngress = trust) });
  return h;
}

describe('Home Assistant ingress', () => {
  it('trusts the Supervisor: admin without a login, every link, form and asset under the ingress path', async () => {
    await ingressHarness(true);
    const { clusterId } = await seedCluster(h);
    const b = new FormClient(h.app, { headers: { 'x-ingress-path': INGRESS }, env: fromPeer('172.30.32.2') });
    const page = await b.get('/');
    expect(page.status).toBe(200);
    expect(page.text).toContain(`href="${INGRESS}/assets/app.css"`);
    expect(page.text).toContain(`href="${INGRESS}/runs"`);
    expect(page.text).toContain(`href="${INGRESS}/clusters/${clusterId}"`);
    expect(page.text).toContain(`action="${INGRESS}/clusters"`);
    expect(page.text).toContain('Home Assistant (admin)');
    expect(page.text).not.toContain('Log out');
    // Every URL the page emits is relative to the ingress path (or an anchor).
    for (const [, url] of page.text.matchAll(/(?:href|action|src|data-stream)="([^"]*)"/g)) {
      expect(url === '#main' || url!.startsWith(`${INGRESS}/`)).toBe(true);
    }
    // The session cookie stays inside the ingress path.
    expect(b.lastSetCookie.join()).toContain(`Path=${INGRESS}`);

    // Forms still need the CSRF secret, and redirects keep the prefix.
    expect((await b.post('/tenants', { name: 'nope' })).status).toBe(403);
    const made = await b.post('/tenants', { name: 'ha', _csrf: csrfOf((await b.get('/tenants')).text) });
    expect(made.status).toBe(303);
    expect(made.location).toBe(`${INGRESS}/tenants`);
    expect((await h.call('GET', '/v1/tenants')).body.tenants.map((t: { name: string }) => t.name)).toContain('ha');
    // Audit shows who acted.
    const cluster = await b.post('/clusters', {
      _csrf: csrfOf((await b.get('/')).text),
      tenant: (await h.call('GET', '/v1/tenants')).body.tenants[0].id,
      name: 'ha-c',
      talosVersion: 'v1.13.9',
      kubernetesVersion: '1.36.3',
      endpoint: 'https://[2001:db8::5]:6443',
    });
    expect(cluster.location).toMatch(new RegExp(`^${INGRESS}/clusters/cl_`));
    const audit = await h.call('GET', '/v1/audit');
    expect(JSON.stringify(audit.body)).toContain('ha-ingress');
  });

  it('accepts the Supervisor as an IPv4-mapped IPv6 peer (dual-stack socket)', async () => {
    await ingressHarness(true);
    const b = new FormClient(h.app, { headers: { 'x-ingress-path': INGRESS }, env: fromPeer('::ffff:172.30.32.2') });
    expect((await b.get('/')).status).toBe(200);
  });

  it('gives nothing to the header from any other address, without the setting, or without the header', async () => {
    await ingressHarness(true);
    for (const peer of ['172.30.32.1', '172.30.32.20', '127.0.0.1', '::1', '2001:db8::1']) {
      const b = new FormClient(h.app, { headers: { 'x-ingress-path': INGRESS }, env: fromPeer(peer) });
      const res = await b.get('/');
      expect(res.status).toBe(303);
      expect(res.location).toBe('/login');
      expect((await b.get('/login')).text).not.toContain(INGRESS);
    }
    const noHeader = new FormClient(h.app, { env: fromPeer('172.30.32.2') });
    expect((await noHeader.get('/')).location).toBe('/login');
    // Without node bindings (edge, plain app.request) there is no peer, so no trust.
    const noPeer = new FormClient(h.app, { headers: { 'x-ingress-path': INGRESS } });
    expect((await noPeer.get('/')).location).toBe('/login');
    await h.close();

    await ingressHarness(false);
    const off = new FormClient(h.app, { headers: { 'x-ingress-path': INGRESS }, env: fromPeer('172.30.32.2') });
    expect((await off.get('/')).location).toBe('/login');
  });

  it('refuses an ingress path that could leave the origin or break out of markup', async () => {
    await ingressHarness(true);
    for (const bad of ['//evil.example', '/a/../b', 'api/x', '/x"><script>', '/a b', 'javascript:alert(1)']) {
      const b = new FormClient(h.app, { headers: { 'x-ingress-path': bad }, env: fromPeer('172.30.32.2') });
      expect((await b.get('/')).location).toBe('/login');
    }
  });

  it('never lets the API trust the ingress header: /v1 still needs a token', async () => {
    await ingressHarness(true);
    const res = await h.app.request('/v1/tenants', { headers: { 'x-ingress-path': INGRESS } }, fromPeer('172.30.32.2'));
    expect(res.status).toBe(401);
  });

  it('the trusted peer is configurable for tests and other hosts', async () => {
    h = await createHarness({ patchDeps: (d) => void (d.settings.trustIngress = true), app: { dashboard: { trustedIngressPeer: '127.0.0.1' } } });
    const loop = new FormClient(h.app, { headers: { 'x-ingress-path': INGRESS }, env: fromPeer('127.0.0.1') });
    expect((await loop.get('/')).status).toBe(200);
    const supervisor = new FormClient(h.app, { headers: { 'x-ingress-path': INGRESS }, env: fromPeer('172.30.32.2') });
    expect((await supervisor.get('/')).location).toBe('/login');
  });
});

describe('actions of other functions', () => {
  it('send the documented request to the API as the signed-in principal, and show the run or the error', async () => {
    h = await createHarness();
    const { clusterId, tenantId } = await seedCluster(h);
    const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'cp-1', role: 'controlplane', provider: 'metal' } });
    const run = await h.deps.jobs.enqueue({ kind: 'provision', clusterId, tenantId, exclusive: false, params: { mode: 'plan' } });
    const seen: Array<{ method: string; path: string; body: unknown; principal: Principal | undefined }> = [];
    let answer: { status: number; body: unknown } = { status: 202, body: { run: { id: run.id } } };

    const app = new Hono<AppEnv>();
    app.use(async (c, next) => {
      c.set('deps', h.deps);
      await next();
    });
    // Reads go to the real API; the new endpoints are recorded and answered here.
    app.route(
      '/',
      dashboardRoutes(async (req, env) => {
        if (req.method === 'GET') return h.app.fetch(req, env);
        const text = await req.text();
        seen.push({ method: req.method, path: new URL(req.url).pathname, body: text ? JSON.parse(text) : undefined, principal: (env as Record<symbol, Principal>)[DISPATCH_PRINCIPAL] });
        return Response.json(answer.body, { status: answer.status });
      }),
    );
    const b = new FormClient(app);
    await b.login(h.adminToken);
    const page = `/clusters/${clusterId}`;

    expect((await b.submit(page, `${page}/provision`, { mode: 'plan' })).location).toBe(`/runs/${run.id}`);
    expect((await b.submit(page, `${page}/provision`, { mode: 'apply' })).location).toBe(`/runs/${run.id}`);
    await b.submit(page, `${page}/bootstrap`, {});
    // The snapshot box comes ticked; a browser sends it as "on", and nothing once unticked.
    expect((await b.get(page)).text).toMatch(/<input id="up-snap" type="checkbox" name="etcdSnapshot" value="on" checked/);
    await b.submit(page, `${page}/upgrade`, { talosVersion: 'v1.14.0', batchSize: '2', etcdSnapshot: 'on' });
    await b.submit(page, `${page}/upgrade`, { talosVersion: 'v1.14.0', batchSize: '' });
    await b.submit(page, `${page}/machines/${m.body.id}/push-config`, { insecure: 'on', certFingerprint: 'AB:CD', mode: 'no-reboot' });
    await b.submit(page, `${page}/machines/${m.body.id}/push-config`, { certFingerprint: '', mode: '' });
    expect((await b.submit(`/runs/${run.id}`, `/runs/${run.id}/approve`, {})).location).toBe(`/runs/${run.id}`);

    expect(seen.map(({ method, path, body }) => [method, path, body])).toEqual([
      ['POST', `/v1/clusters/${clusterId}/provision`, { mode: 'plan' }],
      ['POST', `/v1/clusters/${clusterId}/provision`, { mode: 'apply' }],
      ['POST', `/v1/clusters/${clusterId}/bootstrap`, {}],
      ['POST', `/v1/clusters/${clusterId}/upgrade`, { talosVersion: 'v1.14.0', batchSize: 2, etcdSnapshot: true }],
      ['POST', `/v1/clusters/${clusterId}/upgrade`, { talosVersion: 'v1.14.0', etcdSnapshot: false }],
      ['POST', `/v1/clusters/${clusterId}/machines/${m.body.id}/push-config`, { insecure: true, certFingerprint: 'AB:CD', mode: 'no-reboot' }],
      ['POST', `/v1/clusters/${clusterId}/machines/${m.body.id}/push-config`, { insecure: false }],
      ['POST', `/v1/runs/${run.id}/approve`, undefined],
    ]);
    expect(seen.every((s) => s.principal?.admin === true && s.principal.tokenId === 'env-admin')).toBe(true);

    answer = { status: 409, body: { error: { code: 'conflict', message: 'cluster has an active run' } } };
    const busy = await b.submit(page, `${page}/upgrade`, { talosVersion: 'v1.14.0' });
    expect(busy.status).toBe(409);
    expect(alertOf(busy.text)).toBe('cluster has an active run');
    expect(busy.text).toContain('value="v1.14.0"');
    // The refused form comes back as it was sent: unticked.
    expect(busy.text).toMatch(/<input id="up-snap" type="checkbox" name="etcdSnapshot" value="on"\/?>/);
    const approve = await b.submit(`/runs/${run.id}`, `/runs/${run.id}/approve`, {});
    expect(approve.status).toBe(409);
    expect(alertOf(approve.text)).toBe('cluster has an active run');

    // Retry repeats an upgrade as it was asked for, without its etcd snapshot when it went without.
    answer = { status: 202, body: { run: { id: run.id } } };
    seen.length = 0;
    const upgrade = { talosVersion: 'v1.14.0', image: 'factory.talos.dev/installer/x:v1.14.0', batchSize: 1, stage: false, force: false, preserve: false };
    const without = await h.deps.jobs.enqueue({ kind: 'upgrade', clusterId, tenantId, exclusive: false, params: { ...upgrade, etcdSnapshot: false } });
    const withOne = await h.deps.jobs.enqueue({ kind: 'upgrade-kubernetes', clusterId, tenantId, exclusive: false, params: { fromVersion: '1.36.3', kubernetesVersion: '1.37.0' } });
    for (const r of [without, withOne]) expect((await b.submit(`/runs/${r.id}`, `/runs/${r.id}/retry`, {})).location).toBe(`/runs/${run.id}`);
    expect(seen.map(({ method, path, body }) => [method, path, body])).toEqual([
      ['POST', `/v1/clusters/${clusterId}/upgrade`, { talosVersion: 'v1.14.0', batchSize: 1, etcdSnapshot: false }],
      ['POST', `/v1/clusters/${clusterId}/upgrade-kubernetes`, { version: '1.37.0' }],
    ]);
  });
});
