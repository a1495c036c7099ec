import { Hono, type Context } from 'hono';
import { TrieRouter } from 'hono/router/trie-router';
import { HTTPException } from 'hono/http-exception';
import { matchedRoutes } from 'hono/route';
import { authFailureLimit, type AuthLimitOptions } from './auth-limit.ts';
import { errorMessage } from '../lib/errors.ts';
import { errorBody } from '../lib/http/errors.ts';
import { toApiError } from './api-error.ts';
import type { AppEnv, Deps } from './context.ts';
import type { DashboardOptions } from './dashboard/routes.tsx';
import { countRequests } from './ops/count-requests.ts';
import { opsRoutes } from './ops/routes.ts';


export interface AppOptions {
  /** Failed-authentication limit per client; the client is the dashboard's remote address source unless it names its own. */
  authLimit?: AuthLimitOptions;
  dashboard?: DashboardOptions;
}

const mounters = new WeakMap<object, () => Promise<void>>();

/** Mounts now the routes createApp left for the first request (the runner, once it is up). */
export function mountRoutesNow(app: App): Promise<void> {
  return mounters.get(app)?.() ?? Promise.resolve();
}

/** The Execution context of a Workers request; Hono throws on the runner, which has none. */
function executionContextOf(c: Context<AppEnv>) {
  try {
    return c.executionCtx;
  } catch {
    return undefined;
  }
}

/**
 * The whole HTTP surface; the runner and the tests build it the same way, with their own deps.
 * The probes (/healthz, /readyz, /metrics) are mounted here; every other route module is imported
 * and mounted (functions/mount-routes.ts) by the first request no probe answers, which then runs
 * through the whole app again, so it meets exactly the handlers and order an eager mount has
 * (the runner also mounts them itself shortly after its start: mountRoutesNow).
 */
export function createApp(deps: Deps, opts: AppOptions = {}) {
  // TrieRouter: Hono's default (SmartRouter → RegExpRouter) compiles one regex over all ~200
  // routes on the first request, tens of milliseconds of every runner start; the trie matches
  // the same routes with no such step.
  const app = new Hono<AppEnv>({ router: new TrieRouter() });

  let mounted = false;
  let mounting: Promise<void> | undefined;
  const mount = () =>
    (mounting ??= import('./mount-routes.ts').then(
      (m) => {
        m.mountRoutes(app, opts);
        mounted = true;
      },
      (err: unknown) => {
        // The next request tries again.
        mounting = undefined;
        throw err;
      },
    ));
  mounters.set(app, mount);
  // First, so the request that mounts the routes ran no other middleware (counting, the
  // failed-authentication limit) before it runs through the mounted app. TrieRouter takes routes
  // added after the first request; Hono's default router would refuse them.
  app.use(async (c, next) => {
    if (mounted || matchedRoutes(c).some((r) => r.method !== 'ALL')) return next();
    await mount();
    return app.fetch(c.req.raw, c.env, executionContextOf(c));
  });
  app.use(async (c, next) => {
    c.set('deps', deps);
    await next();
  });
  app.use(countRequests);
  app.use(authFailureLimit({ ...opts.authLimit, remoteAddress: opts.authLimit?.remoteAddress ?? opts.dashboard?.remoteAddress }));

  app.onError((err, c) => {
    const api = toApiError(err);
    if (api) return c.json(errorBody(api), api.status);
    if (err instanceof HTTPException) {
      const code = err.status === 413 ? 'body_too_large' : 'http_error';
      return c.json({ error: { code, message: err.message || 'request rejected' } }, err.status);
    }
    deps.log.error('unhandled error', { route: c.req.routePath, error: errorMessage(err) });
    return c.json({ error: { code: 'internal', message: 'internal error' } }, 500);
  });
  app.notFound((c) => c.json({ error: { code: 'not_found', message: 'no such route' } }, 404));

  app.route('/', opsRoutes());
  return app;
}

export type App = ReturnType<typeof createApp>;
