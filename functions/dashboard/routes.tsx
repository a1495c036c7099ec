import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { getCookie, setCookie } from 'hono/cookie';
import { html } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { authenticate } from '../auth.ts';
import type { AppEnv, Principal } from '../context.ts';
import { apiClient, runIdOf, type ApiClient, type ApiResult, type Dispatch, type Json } from './api.ts';
import { APP_CSS, RUN_LOG_JS } from './assets.ts';
import { readRunLog } from './run-log.ts';
import { apiHealthView, readHealth, UNKNOWN_REPORT, type HealthContext, type HealthView } from './health-view.ts';
import { INGRESS_PRINCIPAL, SUPERVISOR_ADDRESS, ingressDecision, unknownRemoteAddress, type RemoteAddressSource } from './ingress.ts';
import { ClusterPage } from './pages/cluster.tsx';
import { ClustersPage } from './pages/clusters.tsx';
import { LoginPage } from './pages/login.tsx';
import { MessagePage, NotFoundPage, RunOutcome, RunPage, RunsPage } from './pages/runs.tsx';
import type { RunFilter } from './pages/runs-table.tsx';
import { TenantPage, TenantsPage } from './pages/tenants.tsx';
import { AuditPage, BackupsPage } from './pages/audit.tsx';
import { MachinePage, WINDOWS } from './pages/machine.tsx';
import { endSession, isEnded } from './ended-sessions.ts';
import { SESSION_COOKIE, SESSION_TTL_MS, csrfMatches, newSession, openSession, sealSession, type Session } from './session.ts';
import { operations } from '../openapi/operations.ts';
import { ApiReferencePage } from './pages/api-reference.tsx';
import { href, type FormValues, type View } from './view.ts';

export interface DashboardOptions {
  /** The one peer whose X-Ingress-Path is believed. Production: the Supervisor; tests point it at loopback. */
  trustedIngressPeer?: string;
  remoteAddress?: RemoteAddressSource;
  healthView?: HealthView;
  sessionTtlMs?: number;
}

interface DashEnv {
  Variables: AppEnv['Variables'] & { view: View; session: Session; form: FormValues };
}
type Ctx = Context<DashEnv>;

const FORM_LIMIT = 64 * 1024;

// The dashboard shares the root with the API (/v1, /healthz), so its middleware is bound to its
// own paths only. ('/clusters/*' also matches '/clusters', so each path is listed once.)
const PAGE_PATHS = ['/', '/tenants/*', '/clusters/*', '/runs/*', '/backups/*', '/api', '/audit'];
const ALL_PATHS = [...PAGE_PATHS, '/login', '/logout'];

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'self'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

/**
 * The dashboard: server-rendered pages whose every read and change goes through the /v1 API
 * handlers in-process (`dispatch`), as the signed-in principal.
 */
export function dashboardRoutes(dispatch: Dispatch, opts: DashboardOptions = {}) {
  const app = new Hono<DashEnv>();
  const trustedPeer = opts.trustedIngressPeer ?? SUPERVISOR_ADDRESS;
  const remoteAddress = opts.remoteAddress ?? unknownRemoteAddress;
  const healthView = opts.healthView ?? apiHealthView;
  const ttl = opts.sessionTtlMs ?? SESSION_TTL_MS;

  app.get('/assets/app.css', (c) => c.body(APP_CSS, 200, { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'public, max-age=3600' }));
  app.get('/assets/run-log.js', (c) =>
    c.body(RUN_LOG_JS, 200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=3600' }),
  );

  const writeSession = (c: Ctx, s: Session) => {
    const v = c.var.view;
    const https = new URL(c.req.url).protocol === 'https:' || (v.ingress && c.req.header('x-forwarded-proto') === 'https');
    setCookie(c, SESSION_COOKIE, sealSession(c.var.deps.sealer, s), {
      httpOnly: true,
      sameSite: 'Strict',
      secure: https,
      path: v.base || '/',
      maxAge: Math.floor(ttl / 1000),
    });
    c.set('session', s);
    c.set('view', { ...v, csrf: s.csrf });
  };

  // Who is asking, under which base path, with which CSRF secret: settled once per request.
  const identify = async (c: Ctx, next: () => Promise<void>) => {
    const deps = c.var.deps;
    const now = deps.clock.now();
    const ingress = ingressDecision(c, { trustIngress: deps.settings.trustIngress === true, trustedPeer, remoteAddress });
    let session = openSession(deps.sealer, getCookie(c, SESSION_COOKIE), now);
    let fresh = session === null;
    let principal: Principal | null = null;
    if (ingress.trusted) principal = INGRESS_PRINCIPAL;
    else if (session?.token) {
      principal = (await isEnded(deps, session)) ? null : await authenticate(deps, session.token);
      if (!principal) fresh = true; // revoked or rotated away: back to the login page
    }
    if (fresh) session = newSession(now, undefined, ttl);
    c.set('view', { base: ingress.base, ingress: ingress.trusted, principal, csrf: session!.csrf });
    c.set('session', session!);
    if (fresh) writeSession(c, session!);
    await next();
  };
  for (const p of ALL_PATHS) app.use(p, identify);

  // Every state-changing request carries the session's CSRF secret in a hidden field.
  app.on(
    'POST',
    ALL_PATHS,
    bodyLimit({ maxSize: FORM_LIMIT, onError: (c) => c.text('form too large', 413) }),
    async (c, next) => {
      const type = c.req.header('content-type') ?? '';
      const form: FormValues = {};
      if (/^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(type)) {
        let parsed: Record<string, unknown>;
        try {
          parsed = await c.req.parseBody();
        } catch {
          // A truncated or malformed multipart body is the sender's fault, not ours.
          return render(c, 400, <MessagePage v={c.var.view} title="Form rejected" message="The form data could not be read. Reload the page and try again." />);
        }
        for (const [k, val] of Object.entries(parsed)) if (typeof val === 'string') form[k] = val;
      }
      if (!csrfMatches(c.var.session, form._csrf)) {
        return render(c, 403, <MessagePage v={c.var.view} title="Form rejected" message="This form has expired or did not come from this dashboard. Reload the page and try again." />);
      }
      c.set('form', form);
      await next();
    },
  );

  const api = (c: Ctx): ApiClient => apiClient(dispatch, c.var.view.principal!, c.req.raw.signal);
  const go = (c: Ctx, path: string) => c.redirect(href(c.var.view, path), 303);

  /** Pages and actions below need someone signed in. */
  const signedIn = async (c: Ctx, next: () => Promise<void>) => {
    if (!c.var.view.principal) return go(c, '/login');
    await next();
  };

  app.get('/login', (c) => (c.var.view.principal ? go(c, '/') : render(c, 200, <LoginPage v={c.var.view} />)));

  app.post('/login', async (c) => {
    const token = (c.var.form.token ?? '').trim();
    const principal = token ? await authenticate(c.var.deps, token) : null;
    if (!principal) return render(c, 401, <LoginPage v={c.var.view} error="That token is not valid." />);
    // A fresh session (and CSRF secret) on every login, so nothing from before carries over.
    writeSession(c, newSession(c.var.deps.clock.now(), token, ttl));
    return go(c, '/');
  });

  app.post('/logout', async (c) => {
    await endSession(c.var.deps, c.var.session);
    writeSession(c, newSession(c.var.deps.clock.now(), undefined, ttl));
    return go(c, '/login');
  });

  for (const p of PAGE_PATHS) app.use(p, signedIn);

  // ---- clusters list ----
  const clustersPage = async (c: Ctx, status: ContentfulStatusCode, error?: string, values?: FormValues) => {
    const client = api(c);
    const [cl, tn] = await Promise.all([client.get('/v1/clusters'), client.get('/v1/tenants')]);
    const clusters: Json[] = cl.ok ? cl.body.clusters : [];
    const ctx = healthContext(c, client);
    const reports = await Promise.all(clusters.map((x) => readHealth(healthView, ctx, x.id)));
    const health = Object.fromEntries(clusters.map((x, i) => [x.id, reports[i]!.cluster]));
    return render(
      c,
      status,
      <ClustersPage v={c.var.view} clusters={clusters} tenants={tn.ok ? tn.body.tenants : []} health={health} error={error ?? cl.error ?? tn.error} values={values} />,
    );
  };
  app.get('/', (c) => clustersPage(c, 200));

  app.post('/clusters', async (c) => {
    const f = c.var.form;
    const res = await api(c).send('POST', '/v1/clusters', pick(f, ['tenant', 'name', 'talosVersion', 'kubernetesVersion', 'endpoint']));
    if (!res.ok) return clustersPage(c, res.status as ContentfulStatusCode, res.error, f);
    return go(c, `/clusters/${encodeURIComponent(res.body.id)}`);
  });

  // ---- tenants ----
  const tenantsPage = async (c: Ctx, status: ContentfulStatusCode, error?: string, values?: FormValues) => {
    const tn = await api(c).get('/v1/tenants');
    return render(c, status, <TenantsPage v={c.var.view} tenants={tn.ok ? tn.body.tenants : []} error={error ?? tn.error} values={values} />);
  };
  app.get('/api', signedIn, (c) => render(c, 200, <ApiReferencePage v={c.var.view} operations={operations()} />));
  app.get('/tenants', (c) => tenantsPage(c, 200));
  app.post('/tenants', async (c) => {
    const res = await api(c).send('POST', '/v1/tenants', pick(c.var.form, ['name']));
    if (!res.ok) return tenantsPage(c, res.status as ContentfulStatusCode, res.error, c.var.form);
    return go(c, '/tenants');
  });

  // ---- one cluster ----
  const clusterPage = async (c: Ctx, status: ContentfulStatusCode, error?: string, failedForm?: string) => {
    const client = api(c);
    const id = encodeURIComponent(c.req.param('id')!);
    const cl = await client.get(`/v1/clusters/${id}`);
    if (!cl.ok) return notFoundOr(c, cl, 'Cluster');
    const [ms, rs, health, mesh, snaps] = await Promise.all([
      client.get(`/v1/clusters/${id}/machines`),
      client.get(`/v1/runs?cluster=${id}&limit=20`),
      readHealth(healthView, healthContext(c, client), cl.body.id).catch(() => UNKNOWN_REPORT),
      client.get(`/v1/clusters/${id}/mesh`),
      client.get(`/v1/clusters/${id}/etcd-snapshots`),
    ]);
    return render(
      c,
      status,
      <ClusterPage
        v={c.var.view}
        cluster={cl.body}
        machines={ms.ok ? ms.body.machines : []}
        runs={rs.ok ? rs.body.runs : []}
        health={health}
        mesh={mesh.ok ? mesh.body : undefined}
        snapshots={snaps.ok ? snaps.body.snapshots : undefined}
        error={error ?? ms.error ?? rs.error}
        failedForm={failedForm}
        values={c.var.form}
        now={c.var.deps.clock.now()}
      />,
    );
  };
  app.get('/clusters/:id', (c) => clusterPage(c, 200));

  app.post('/clusters/:id/machines', async (c) => {
    const id = encodeURIComponent(c.req.param('id'));
    const res = await api(c).send('POST', `/v1/clusters/${id}/machines`, pick(c.var.form, ['name', 'role', 'provider', 'address', 'installDisk']));
    if (!res.ok) return clusterPage(c, res.status as ContentfulStatusCode, res.error, 'machine');
    return go(c, `/clusters/${id}`);
  });

  /** Actions that queue a run: success shows the run, failure shows the API's message where the form was. */
  const clusterAction = (apiPath: (c: Ctx) => string, body: (f: FormValues) => Record<string, unknown> | undefined, formName: string) => async (c: Ctx) => {
    const res = await api(c).send('POST', apiPath(c), body(c.var.form) ?? {});
    if (!res.ok) return clusterPage(c, res.status as ContentfulStatusCode, res.error, formName);
    return afterRun(c, res, `/clusters/${encodeURIComponent(c.req.param('id')!)}`);
  };
  const clusterPath = (suffix: string) => (c: Ctx) => `/v1/clusters/${encodeURIComponent(c.req.param('id')!)}${suffix}`;

  /**
   * A file from the API, passed on as it streams (never held here): `pass` are the API's headers
   * kept, over `contentType` and `headers`. A refusal shows on the cluster page, at `formName`.
   */
  const download = async (
    c: Ctx,
    apiPath: string,
    o: { what: string; formName: string; contentType: string; headers: Record<string, string>; pass: string[] },
  ): Promise<Response> => {
    const res = await api(c).raw(apiPath, { headers: { accept: o.contentType } });
    if (!res.ok) {
      const body = (await res.json().catch(() => null)) as Json;
      return clusterPage(c, res.status as ContentfulStatusCode, `The ${o.what} is not available: ${String(body?.error?.message ?? res.status)}`, o.formName);
    }
    const headers: Record<string, string> = { ...SECURITY_HEADERS, 'content-type': o.contentType, ...o.headers };
    for (const name of o.pass) {
      const value = res.headers.get(name);
      if (value !== null) headers[name] = value;
    }
    return new Response(res.body, { status: 200, headers });
  };

  app.post('/clusters/:id/provision', clusterAction(clusterPath('/provision'), (f) => pick(f, ['mode']), 'provision'));
  app.post('/clusters/:id/bootstrap', clusterAction(clusterPath('/bootstrap'), () => ({}), 'bootstrap'));
  app.post(
    '/clusters/:id/upgrade',
    clusterAction(clusterPath('/upgrade'), (f) => ({ ...pick(f, ['talosVersion']), ...numberField(f, 'batchSize'), etcdSnapshot: f.etcdSnapshot === 'on' }), 'upgrade'),
  );
  app.post(
    '/clusters/:id/upgrade-kubernetes',
    clusterAction(clusterPath('/upgrade-kubernetes'), (f) => ({ ...pick(f, ['version']), etcdSnapshot: f.etcdSnapshot === 'on', includePendingConfig: f.includePendingConfig === 'on', manifests: f.manifests === 'on', recreateManifests: f.recreateManifests === 'on' }), 'upgrade-kubernetes'),
  );
  app.post(
    '/clusters/:id/sync-manifests',
    clusterAction(clusterPath('/sync-manifests'), (f) => ({ dryRun: f.dryRun === 'on', prune: f.prune === 'on', recreate: f.recreate === 'on', ...pick(f, ['inventoryPolicy']) }), 'sync-manifests'),
  );
  app.post(
    '/clusters/:id/machines/:mid/push-config',
    clusterAction(
      (c) => `${clusterPath('/machines/')(c)}${encodeURIComponent(c.req.param('mid')!)}/push-config`,
      (f) => ({ insecure: f.insecure === 'on', ...pick(f, ['certFingerprint', 'mode']) }),
      'push-config',
    ),
  );

  // ---- runs ----
  const runsPage = async (c: Ctx, status: ContentfulStatusCode, error?: string) => {
    const client = api(c);
    const [rs, cl] = await Promise.all([client.get('/v1/runs?limit=500'), client.get('/v1/clusters')]);
    const all: Json[] = rs.ok ? rs.body.runs : [];
    const filter: RunFilter = {};
    for (const k of ['kind', 'state', 'collect'] as const) {
      const val = c.req.query(k);
      if (val && /^[a-z-]{1,32}$/.test(val)) filter[k] = val;
    }
    // Collect passes run every few minutes and would push everything else out of the list.
    const isCron = (r: Json) => r.kind === 'collect';
    const matching = all.filter((r) => (!filter.kind || r.kind === filter.kind) && (!filter.state || r.state === filter.state));
    const showCollect = filter.collect === 'show' || filter.kind === 'collect';
    const runs = showCollect ? matching : matching.filter((r) => !isCron(r));
    const kinds = [...new Set(all.map((r) => String(r.kind)))].sort();
    return render(
      c,
      status,
      <RunsPage
        v={c.var.view}
        runs={runs.slice(0, 100)}
        names={clusterNames(cl)}
        filter={filter}
        kinds={kinds}
        hidden={matching.length - runs.length}
        now={c.var.deps.clock.now()}
        error={error ?? rs.error}
      />,
    );
  };
  app.get('/runs', (c) => runsPage(c, 200));
  app.post('/backups', async (c) => {
    const res = await api(c).send('POST', '/v1/backups');
    if (!res.ok) return runsPage(c, res.status as ContentfulStatusCode, res.error);
    return afterRun(c, res, '/runs');
  });

  const runPage = async (c: Ctx, status: ContentfulStatusCode, error?: string) => {
    const client = api(c);
    const ev = await client.get(`/v1/runs/${encodeURIComponent(c.req.param('id')!)}/events`);
    if (!ev.ok) return notFoundOr(c, ev, 'Run');
    const run = ev.body.run;
    const now = c.var.deps.clock.now();
    const log = await readRunLog(client, ev.body);
    if (c.req.query('part') === 'outcome') {
      return c.html(await html`${<RunOutcome v={c.var.view} run={run} events={[...log.head, ...log.tail]} now={now} />}`, 200, SECURITY_HEADERS);
    }
    const cl = run.cluster ? await client.get(`/v1/clusters/${encodeURIComponent(run.cluster)}`) : null;
    return render(c, status, <RunPage v={c.var.view} run={run} log={log} clusterName={cl?.ok ? cl.body.name : undefined} now={now} error={error} />);
  };
  app.get('/runs/:id', (c) => runPage(c, 200));
  for (const action of ['cancel', 'approve'] as const) {
    app.post(`/runs/:id/${action}`, async (c) => {
      const id = encodeURIComponent(c.req.param('id'));
      const res = await api(c).send('POST', `/v1/runs/${id}/${action}`);
      if (!res.ok) return runPage(c, res.status as ContentfulStatusCode, res.error);
      return afterRun(c, res, `/runs/${id}`);
    });
  }
  // Starts the same work again: the API call the first run came from, with its parameters.
  app.post('/runs/:id/retry', async (c) => {
    const client = api(c);
    const rid = encodeURIComponent(c.req.param('id'));
    const got = await client.get(`/v1/runs/${rid}`);
    if (!got.ok) return notFoundOr(c, got, 'Run');
    const run = got.body;
    const p = run.params ?? {};
    const cid = run.cluster ? encodeURIComponent(run.cluster) : '';
    // An upgrade told to skip its etcd snapshot is retried the same way.
    const withoutSnapshot = p.etcdSnapshot === false ? { etcdSnapshot: false } : {};
    // The params keep only what differs from the defaults, so they go back as they are.
    const manifestChoices = given(p, ['manifests', 'pruneManifests', 'recreateManifests', 'manifestsInventoryPolicy']);
    const call: [string, Record<string, unknown>] | null =
      run.kind === 'provision'
        ? [`/v1/clusters/${cid}/provision`, { mode: p.planRun ? 'plan' : p.mode, ...(p.destroy ? { destroy: true } : {}) }]
        : run.kind === 'bootstrap'
          ? [`/v1/clusters/${cid}/bootstrap`, {}]
          : run.kind === 'upgrade'
            ? [`/v1/clusters/${cid}/upgrade`, { talosVersion: p.talosVersion, ...(p.batchSize ? { batchSize: p.batchSize } : {}), ...withoutSnapshot }]
            : run.kind === 'upgrade-kubernetes'
              ? [`/v1/clusters/${cid}/upgrade-kubernetes`, { version: p.kubernetesVersion, ...withoutSnapshot, ...given(p, ['includePendingConfig']), ...manifestChoices }]
            : run.kind === 'sync-manifests'
              ? [`/v1/clusters/${cid}/sync-manifests`, given(p, ['prune', 'dryRun', 'recreate', 'inventoryPolicy'])]
            : run.kind === 'backup'
              ? ['/v1/backups', {}]
              : null;
    if (!call) return runPage(c, 400, `A ${String(run.kind)} run cannot be retried from here.`);
    const res = await client.send('POST', call[0], call[1]);
    if (!res.ok) return runPage(c, res.status as ContentfulStatusCode, res.error);
    return afterRun(c, res, `/runs/${rid}`);
  });

  // EventSource cannot send an Authorization header; this relays the API's stream for the session.
  // Asked for JSON instead, it relays one page of the log: the run page's "Show more" on a finished run.
  app.get('/runs/:id/events', async (c) => {
    const accept = c.req.header('accept') ?? '';
    if (accept.includes('application/json') && !accept.includes('text/event-stream')) {
      const qs = new URLSearchParams();
      for (const k of ['after', 'limit']) {
        const val = c.req.query(k);
        if (val !== undefined) qs.set(k, val);
      }
      // The API checks the numbers and the principal's right to the run, as for any client.
      const res = await api(c).raw(`/v1/runs/${encodeURIComponent(c.req.param('id'))}/events${qs.size ? `?${qs.toString()}` : ''}`, { headers: { accept: 'application/json' } });
      return new Response(res.body, {
        status: res.status,
        headers: { 'content-type': res.headers.get('content-type') ?? 'application/json', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', vary: 'accept' },
      });
    }
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    const lastId = c.req.header('last-event-id');
    if (lastId) headers['last-event-id'] = lastId;
    const after = c.req.query('after');
    const qs = after && /^\d+$/.test(after) ? `?after=${after}` : '';
    const res = await api(c).raw(`/v1/runs/${encodeURIComponent(c.req.param('id'))}/events${qs}`, { headers });
    const streaming = res.ok && (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
    return new Response(streaming ? withKeepAlive(res.body) : res.body, {
      status: res.status,
      headers: { 'content-type': res.headers.get('content-type') ?? 'text/event-stream', 'cache-control': 'no-store', 'x-accel-buffering': 'no' },
    });
  });

  // ---- lifecycle: edit, delete, destroy, downloads ----
  app.post('/clusters/:id/edit', async (c) => {
    const id = encodeURIComponent(c.req.param('id'));
    const res = await api(c).send('PATCH', `/v1/clusters/${id}`, pick(c.var.form, ['kubernetesVersion', 'endpoint']));
    if (!res.ok) return clusterPage(c, res.status as ContentfulStatusCode, res.error, 'edit');
    return go(c, `/clusters/${id}`);
  });
  app.post('/clusters/:id/mesh', async (c) => {
    const id = encodeURIComponent(c.req.param('id'));
    const res = await api(c).send('PUT', `/v1/clusters/${id}/mesh`, pick(c.var.form, ['endpoint']));
    if (!res.ok) return clusterPage(c, res.status as ContentfulStatusCode, res.error, 'mesh');
    // A changed endpoint queues the re-push of the nodes that hold the old one: show that run.
    const repush = typeof res.body?.repush?.run === 'string' ? res.body.repush.run : undefined;
    return go(c, repush ? `/runs/${encodeURIComponent(repush)}` : `/clusters/${id}`);
  });
  app.post('/clusters/:id/mesh/repush', clusterAction(clusterPath('/mesh/repush'), () => ({}), 'mesh'));
  app.post('/clusters/:id/mesh/off', async (c) => {
    const id = encodeURIComponent(c.req.param('id'));
    const res = await api(c).send('DELETE', `/v1/clusters/${id}/mesh`);
    if (!res.ok) return clusterPage(c, res.status as ContentfulStatusCode, res.error, 'mesh');
    return go(c, `/clusters/${id}`);
  });
  // etcd: take a snapshot, defragment, restore one (each a run), and download one (secrets:read).
  app.post('/clusters/:id/etcd-snapshots', clusterAction(clusterPath('/etcd-snapshots'), () => ({}), 'etcd'));
  app.post('/clusters/:id/etcd-defrag', clusterAction(clusterPath('/etcd-defrag'), () => ({}), 'etcd'));
  app.post(
    '/clusters/:id/etcd-snapshots/:sid/restore',
    clusterAction((c) => `${clusterPath('/etcd-snapshots/')(c)}${encodeURIComponent(c.req.param('sid')!)}/restore`, (f) => pick(f, ['machine']), 'etcd'),
  );
  app.get('/clusters/:id/etcd-snapshots/:sid', (c) =>
    download(c, `${clusterPath('/etcd-snapshots/')(c)}${encodeURIComponent(c.req.param('sid'))}`, {
      what: 'snapshot',
      formName: 'etcd',
      contentType: 'application/octet-stream',
      headers: { 'cache-control': 'no-store' },
      pass: ['content-length', 'content-disposition', 'x-etcd-revision', 'x-content-sha256'],
    }),
  );
  // Every bare-metal machine in one run.
  app.post(
    '/clusters/:id/push-config',
    clusterAction(clusterPath('/push-config'), (f) => ({ insecure: f.insecure === 'on', ...(f.bootstrap === 'on' ? { bootstrap: true } : {}) }), 'cluster-push'),
  );
  app.post('/clusters/:id/delete', async (c) => {
    const id = encodeURIComponent(c.req.param('id'));
    const res = await api(c).send('DELETE', `/v1/clusters/${id}`);
    if (!res.ok) return clusterPage(c, res.status as ContentfulStatusCode, res.error, 'delete');
    return go(c, '/');
  });
  app.post('/clusters/:id/destroy', clusterAction(clusterPath('/provision'), () => ({ mode: 'plan', destroy: true }), 'destroy'));
  for (const file of ['talosconfig', 'kubeconfig'] as const) {
    app.get(`/clusters/:id/${file}`, (c) =>
      download(c, clusterPath(`/${file}`)(c), {
        what: file,
        formName: 'download',
        contentType: 'application/yaml',
        headers: { 'content-disposition': `attachment; filename="${file}"` },
        pass: ['content-type', 'content-disposition'],
      }),
    );
  }

  // ---- one machine: charts, edit, delete ----
  app.get('/clusters/:id/machines/:mid', async (c) => {
    const client = api(c);
    const cid = encodeURIComponent(c.req.param('id'));
    const mid = encodeURIComponent(c.req.param('mid'));
    const [cl, m] = await Promise.all([client.get(`/v1/clusters/${cid}`), client.get(`/v1/clusters/${cid}/machines/${mid}`)]);
    if (!cl.ok) return notFoundOr(c, cl, 'Cluster');
    if (!m.ok) return notFoundOr(c, m, 'Machine');
    const win = WINDOWS.find((w) => w.key === c.req.query('window')) ?? WINDOWS[1]!;
    const now = c.var.deps.clock.now();
    const since = now - win.ms;
    const res = await client.get(`/v1/clusters/${cid}/machines/${mid}/samples?since=${since}&resolution=${win.resolution}`);
    const series: Record<string, Array<[number, number]>> = {};
    for (const pt of res.ok ? (res.body.points as Json[]) : []) {
      const value = Number(pt.value ?? pt.avg);
      if (Number.isFinite(value)) (series[pt.metric] ??= []).push([Number(pt.ts), value]);
    }
    return render(c, 200, <MachinePage v={c.var.view} cluster={cl.body} machine={m.body} series={series} window={win} windows={WINDOWS} from={since} to={now} error={res.error} values={{}} />);
  });
  const machineForm = async (c: Ctx, method: 'PATCH' | 'DELETE', body?: Record<string, unknown>) => {
    const client = api(c);
    const cid = encodeURIComponent(c.req.param('id')!);
    const mid = encodeURIComponent(c.req.param('mid')!);
    const res = await client.send(method, `/v1/clusters/${cid}/machines/${mid}`, body);
    if (res.ok) return go(c, method === 'DELETE' ? `/clusters/${cid}` : `/clusters/${cid}/machines/${mid}`);
    const [cl, m] = await Promise.all([client.get(`/v1/clusters/${cid}`), client.get(`/v1/clusters/${cid}/machines/${mid}`)]);
    if (!cl.ok || !m.ok) return notFoundOr(c, cl.ok ? m : cl, 'Machine');
    const now = c.var.deps.clock.now();
    return render(
      c,
      res.status as ContentfulStatusCode,
      <MachinePage v={c.var.view} cluster={cl.body} machine={m.body} series={{}} window={WINDOWS[1]!} windows={WINDOWS} from={now - WINDOWS[1]!.ms} to={now} error={res.error} values={c.var.form} failed={method === 'DELETE' ? 'delete' : 'edit'} />,
    );
  };
  app.post('/clusters/:id/machines/:mid/edit', (c) => {
    const f = c.var.form;
    // A cleared field clears the value; the API takes null for that.
    return machineForm(c, 'PATCH', { address: f.address?.trim() || null, installDisk: f.installDisk?.trim() || null });
  });
  app.post('/clusters/:id/machines/:mid/delete', (c) => machineForm(c, 'DELETE'));

  // ---- tenant: tokens, provider credentials, webhook secret ----
  const tenantPage = async (c: Ctx, status: ContentfulStatusCode, extra: { error?: string; failed?: string; created?: { label: string; secret: string } } = {}) => {
    const client = api(c);
    const tid = encodeURIComponent(c.req.param('tenant')!);
    const [t, tok, prov] = await Promise.all([client.get(`/v1/tenants/${tid}`), client.get(`/v1/tenants/${tid}/tokens`), client.get(`/v1/tenants/${tid}/providers`)]);
    if (!t.ok) return notFoundOr(c, t, 'Tenant');
    return render(
      c,
      status,
      <TenantPage
        v={c.var.view}
        tenant={t.body}
        tokens={tok.ok ? tok.body.tokens : []}
        providers={prov.ok ? prov.body.providers : []}
        error={extra.error ?? tok.error ?? prov.error}
        failed={extra.failed}
        created={extra.created}
        values={c.var.form ?? {}}
      />,
    );
  };
  app.get('/tenants/:tenant', (c) => tenantPage(c, 200));
  app.post('/tenants/:tenant/tokens', async (c) => {
    const tid = encodeURIComponent(c.req.param('tenant'));
    const f = c.var.form;
    const scopes = ['read', 'write', 'secrets'].filter((s) => f[`scope-${s}`] === 'on');
    const res = await api(c).send('POST', `/v1/tenants/${tid}/tokens`, { ...pick(f, ['name']), ...(scopes.length ? { scopes } : {}) });
    if (!res.ok) return tenantPage(c, res.status as ContentfulStatusCode, { error: res.error, failed: 'token' });
    return tenantPage(c, 201, { created: { label: `Token "${String(res.body.name)}"`, secret: String(res.body.token) } });
  });
  app.post('/tenants/:tenant/tokens/:tok/delete', async (c) => {
    const tid = encodeURIComponent(c.req.param('tenant'));
    const res = await api(c).send('DELETE', `/v1/tenants/${tid}/tokens/${encodeURIComponent(c.req.param('tok'))}`);
    if (!res.ok) return tenantPage(c, res.status as ContentfulStatusCode, { error: res.error });
    return go(c, `/tenants/${tid}`);
  });
  app.post('/tenants/:tenant/providers', async (c) => {
    const tid = encodeURIComponent(c.req.param('tenant'));
    const f = c.var.form;
    const variables: Record<string, string> = {};
    // One NAME=value per line: the values are write-only and never shown again.
    for (const line of (f.variables ?? '').split(/\r?\n/)) {
      const i = line.indexOf('=');
      if (line.trim() === '') continue;
      if (i <= 0) return tenantPage(c, 400, { error: `Each line needs the form NAME=value; "${line.slice(0, 40).split('=')[0]}" has no "=".`, failed: 'provider' });
      variables[line.slice(0, i).trim()] = line.slice(i + 1);
    }
    const provider = encodeURIComponent((f.provider ?? '').trim());
    const res = await api(c).send('PUT', `/v1/tenants/${tid}/providers/${provider}`, { env: variables });
    if (!res.ok) return tenantPage(c, res.status as ContentfulStatusCode, { error: res.error, failed: 'provider' });
    return go(c, `/tenants/${tid}`);
  });
  app.post('/tenants/:tenant/providers/:provider/delete', async (c) => {
    const tid = encodeURIComponent(c.req.param('tenant'));
    const res = await api(c).send('DELETE', `/v1/tenants/${tid}/providers/${encodeURIComponent(c.req.param('provider'))}`);
    if (!res.ok) return tenantPage(c, res.status as ContentfulStatusCode, { error: res.error });
    return go(c, `/tenants/${tid}`);
  });
  app.post('/tenants/:tenant/webhook-secret', async (c) => {
    const res = await api(c).send('POST', `/v1/tenants/${encodeURIComponent(c.req.param('tenant'))}/webhook-secret`, {});
    if (!res.ok) return tenantPage(c, res.status as ContentfulStatusCode, { error: res.error, failed: 'webhook' });
    return tenantPage(c, 201, { created: { label: `Webhook secret (send signatures in ${String(res.body.header)})`, secret: String(res.body.secret) } });
  });

  // ---- audit log and backups ----
  app.get('/audit', async (c) => {
    const client = api(c);
    const [au, tn] = await Promise.all([client.get('/v1/audit?limit=500'), client.get('/v1/tenants')]);
    const filter = { action: (c.req.query('action') ?? '').trim().slice(0, 100), tenant: (c.req.query('tenant') ?? '').trim().slice(0, 64) };
    const all: Json[] = au.ok ? au.body.entries : [];
    const entries = all.filter((e) => (!filter.action || String(e.action).includes(filter.action)) && (!filter.tenant || e.tenantId === filter.tenant));
    return render(c, 200, <AuditPage v={c.var.view} entries={entries.slice(0, 200)} tenants={tn.ok ? tn.body.tenants : []} filter={filter} error={au.error} />);
  });
  /** The backups page; `error` is an action's, shown instead of the lists' own. */
  const backupsPage = async (c: Ctx, status: ContentfulStatusCode, error?: string) => {
    const client = api(c);
    const [files, rs] = await Promise.all([client.get('/v1/backups'), client.get('/v1/runs?limit=500')]);
    const runs: Json[] = rs.ok ? rs.body.runs.filter((r: Json) => r.kind === 'backup') : [];
    // A host that keeps no backup files (409) is not an error to show.
    const listError = files.status === 409 ? undefined : (files.error ?? rs.error);
    return render(c, status, <BackupsPage v={c.var.view} files={files.ok ? files.body.backups : []} runs={runs} now={c.var.deps.clock.now()} error={error ?? listError} />);
  };
  app.get('/backups', (c) => backupsPage(c, 200));
  app.post('/backups/:name/delete', async (c) => {
    const res = await api(c).send('DELETE', `/v1/backups/${encodeURIComponent(c.req.param('name'))}`);
    if (!res.ok) return backupsPage(c, res.status as ContentfulStatusCode, res.error);
    return go(c, '/backups');
  });
  app.get('/backups/:name', async (c) => {
    const res = await api(c).raw(`/v1/backups/${encodeURIComponent(c.req.param('name'))}`, { headers: { accept: 'application/octet-stream' } });
    if (!res.ok) return res.status === 404 ? render(c, 404, <NotFoundPage v={c.var.view} what="This backup does not exist." />) : render(c, res.status as ContentfulStatusCode, <MessagePage v={c.var.view} title="Backup" message={`The backup cannot be downloaded (${res.status}).`} />);
    const headers: Record<string, string> = { ...SECURITY_HEADERS };
    for (const h of ['content-type', 'content-length', 'content-disposition']) {
      const val = res.headers.get(h);
      if (val) headers[h] = val;
    }
    return new Response(res.body, { status: 200, headers });
  });

  /** An API 404 becomes the friendly page; any other failure shows the API's words. */
  const notFoundOr = (c: Ctx, res: ApiResult, what: string) =>
    res.status === 404
      ? render(c, 404, <NotFoundPage v={c.var.view} what={`This ${what.toLowerCase()} does not exist, or this token cannot see it.`} />)
      : render(c, res.status as ContentfulStatusCode, <MessagePage v={c.var.view} title={what} message={res.error ?? `request failed (${res.status})`} />);

  // Anything else: a page for people, JSON for the API and its clients.
  app.get('*', async (c, next) => {
    const path = c.req.path;
    const wantsHtml = (c.req.header('accept') ?? '').includes('text/html');
    if (path.startsWith('/v1/') || path === '/v1' || !wantsHtml) return c.json({ error: { code: 'not_found', message: 'no such route' } }, 404);
    return identify(c, next);
  }, (c) => render(c, 404, <NotFoundPage v={c.var.view} />));

  const afterRun = (c: Ctx, res: ApiResult, fallback: string) => {
    const runId = runIdOf(res.body);
    return go(c, runId ? `/runs/${encodeURIComponent(runId)}` : fallback);
  };

  const healthContext = (c: Ctx, client: ApiClient): HealthContext => ({
    deps: c.var.deps,
    principal: c.var.view.principal!,
    get: async (path) => {
      const r = await client.get(path);
      return { status: r.status, body: r.body };
    },
  });

  return app;
}

const SSE_KEEPALIVE_MS = 15_000;

function clusterNames(res: ApiResult): Record<string, string> {
  return Object.fromEntries((res.ok ? (res.body.clusters as Json[]) : []).map((x) => [String(x.id), String(x.name)]));
}

/**
 * Opens the stream with a comment so the headers go out at once (the server holds them until the
 * first byte, and a run may be quiet for long), then keeps idle proxies such as ingress from
 * closing it.
 */
function withKeepAlive(body: ReadableStream<Uint8Array> | null): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  const reader = body?.getReader();
  let timer: ReturnType<typeof setInterval> | undefined;
  const stop = () => clearInterval(timer);
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(enc.encode(': stream open\nretry: 3000\n\n'));
      timer = setInterval(() => {
        try {
          controller.enqueue(enc.encode(': keep-alive\n\n'));
        } catch {
          stop();
        }
      }, SSE_KEEPALIVE_MS);
    },
    async pull(controller) {
      const chunk = reader ? await reader.read() : { done: true as const, value: undefined };
      if (chunk.done) {
        stop();
        controller.close();
      } else controller.enqueue(chunk.value);
    },
    async cancel(reason) {
      stop();
      await reader?.cancel(reason);
    },
  });
}

async function render(c: Ctx, status: ContentfulStatusCode, page: HtmlEscapedString | Promise<HtmlEscapedString>) {
  const body = await html`<!doctype html>${page}`;
  return c.html(body, status, SECURITY_HEADERS);
}

/** The filled-in fields among `keys`; a blank optional field is left out, so the API sees it absent. */
function pick(f: FormValues, keys: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of keys) {
    const val = f[k]?.trim();
    if (val) out[k] = val;
  }
  return out;
}

/** The entries of `o` among `keys` that are set. */
function given(o: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]]));
}

/** A whole number stays a number; anything else goes to the API as typed, for it to reject. */
function numberField(f: FormValues, key: string): Record<string, unknown> {
  const val = f[key]?.trim();
  if (!val) return {};
  return { [key]: /^-?\d+$/.test(val) ? Number(val) : val };
}
