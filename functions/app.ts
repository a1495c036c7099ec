import { etcdSnapshotRoutes } from './etcd/routes.ts';
import { Hono } from 'hono';
import { TrieRouter } from 'hono/router/trie-router';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import { requireAuth } from './auth.ts';
import { authFailureLimit, type AuthLimitOptions } from './auth-limit.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { DomainError, errorMessage, type ProblemKind } from '../lib/errors.ts';
import { ApiError, errorBody } from '../lib/http/errors.ts';
import { ActiveRunConflict } from '../lib/jobs/queue.ts';
import { auditRoutes } from './audit/routes.ts';
import { backupRoutes } from './backup/routes.ts';
import type { AppEnv, Deps } from './context.ts';
import { dashboardRoutes, type DashboardOptions } from './dashboard/routes.tsx';
import { collectRoutes, healthRoutes } from './collect/routes.ts';
import { clusterRoutes } from './inventory/clusters.ts';
import { machineRoutes } from './inventory/machines.ts';
import { machineConfigRoutes } from './machine-config/routes.ts';
import { meshRoutes } from './mesh/routes.ts';
import { tenantRoutes } from './inventory/tenants.ts';
import { countRequests } from './ops/count-requests.ts';
import { opsRoutes } from './ops/routes.ts';
import { openApiDocument } from './openapi/document.ts';
import pkg from '../package.json' with { type: 'json' };
import { providerCredentialRoutes } from './providers/routes.ts';
import { runRoutes } from './runs/routes.ts';
import { approveRoutes, provisionHookRoutes, provisionRoutes } from './provision/routes.ts';
import { pushConfigRoutes } from './push-config/routes.ts';
import { stateBackendRoutes } from './state/backend.ts';
import { upgradeRoutes } from './upgrade/routes.ts';
import { upgradeKubernetesRoutes } from './upgrade/kubernetes-routes.ts';
import { clusterStateRoutes } from './state/cluster-routes.ts';
import { webhookSecretRoutes } from './webhooks/secret.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

/** The one place a domain failure becomes an HTTP status. */
const STATUS_OF = { invalid: 400, forbidden: 403, not_found: 404, conflict: 409, unavailable: 503 } as const satisfies Record<ProblemKind, number>;

const apiBodyLimit = () =>
  bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => {
      throw new ApiError(413, 'body_too_large', `request body exceeds ${MAX_BODY_BYTES} bytes`);
    },
  });

export interface AppOptions {
  /** Failed-authentication limit per client; the client is the dashboard's remote address source. */
  authLimit?: Omit<AuthLimitOptions, 'remoteAddress'>;
  dashboard?: DashboardOptions;
}

/** The whole HTTP surface; the runner and the tests build it the same way, with their own deps. */
export function createApp(deps: Deps, opts: AppOptions = {}) {
  // TrieRouter: Hono's default (SmartRouter → RegExpRouter) compiles one regex over all ~200
  // routes on the first request, tens of milliseconds of every runner start; the trie matches
  // the same routes with no such step.
  const app = new Hono<AppEnv>({ router: new TrieRouter() });

  app.use(async (c, next) => {
    c.set('deps', deps);
    await next();
  });
  app.use(countRequests);
  app.use(authFailureLimit({ ...opts.authLimit, remoteAddress: opts.dashboard?.remoteAddress }));

  app.onError((err, c) => {
    if (err instanceof ApiError) return c.json(errorBody(err), err.status);
    if (err instanceof DomainError) return c.json(errorBody(new ApiError(STATUS_OF[err.kind], err.code, err.message, err.details)), STATUS_OF[err.kind]);
    if (err instanceof ActiveRunConflict) {
      return c.json(errorBody(new ApiError(409, 'run_active', err.message, { activeRun: err.activeRunId })), 409);
    }
    // Two requests racing to create one name: the unique index decided, the loser is told so.
    if (isUniqueViolation(err)) return c.json({ error: { code: 'conflict', message: 'that name is already taken' } }, 409);
    if (err instanceof HTTPException) {
      const code = err.status === 413 ? 'body_too_large' : 'http_error';
      return c.json({ error: { code, message: err.message || 'request rejected' } }, err.status);
    }
    deps.log.error('unhandled error', { route: c.req.routePath, error: errorMessage(err) });
    return c.json({ error: { code: 'internal', message: 'internal error' } }, 500);
  });
  app.notFound((c) => c.json({ error: { code: 'not_found', message: 'no such route' } }, 404));

  const v1 = new Hono<AppEnv>();
  v1.use(apiBodyLimit());
  v1.use(requireAuth);
  v1.route('/tenants', tenantRoutes());
  v1.route('/tenants', providerCredentialRoutes());
  v1.route('/tenants', webhookSecretRoutes());
  v1.route('/clusters', clusterRoutes());
  v1.route('/clusters', machineRoutes());
  v1.route('/clusters', machineConfigRoutes());
  v1.route('/clusters', clusterStateRoutes());
  v1.route('/clusters', provisionRoutes());
  v1.route('/clusters', healthRoutes());
  v1.route('/collect', collectRoutes());
  v1.route('/clusters', pushConfigRoutes());
  v1.route('/clusters', upgradeRoutes());
  v1.route('/clusters', upgradeKubernetesRoutes());
  v1.route('/clusters', etcdSnapshotRoutes());
  v1.route('/clusters', meshRoutes());
  v1.route('/runs', runRoutes());
  v1.route('/runs', approveRoutes());
  v1.route('/audit', auditRoutes());
  v1.route('/backups', backupRoutes());

  app.route('/', opsRoutes());
  app.get('/openapi.json', (c) => c.json(openApiDocument(pkg.version)));
  // Mounted before /v1 so tofu's requests meet the state backend's own body limit and basic
  // auth: the first matching handler answers, and the /v1 middleware below never runs for them.
  app.route('/v1/state', stateBackendRoutes());
  // Webhooks authenticate by signature, not bearer token.
  const hooks = new Hono<AppEnv>();
  hooks.use(apiBodyLimit());
  hooks.route('/', provisionHookRoutes());
  app.route('/v1/hooks', hooks);
  app.route('/v1', v1);
  // The dashboard reaches the API through the app itself, so both run the same handlers.
  app.route('/', dashboardRoutes((req, env) => app.fetch(req, env), opts.dashboard));
  return app;
}

export type App = ReturnType<typeof createApp>;
