import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import { requireAuth } from '../lib/auth/middleware.ts';
import { ApiError, errorBody } from '../lib/http/errors.ts';
import { ActiveRunConflict } from '../lib/jobs/queue.ts';
import { auditRoutes } from './audit/routes.ts';
import { backupRoutes } from './backup/index.ts';
import type { AppEnv, Deps } from './deps.ts';
import { dashboardRoutes, type DashboardOptions } from './dashboard/routes.tsx';
import { clusterRoutes } from './inventory/clusters.ts';
import { machineRoutes } from './inventory/machines.ts';
import { tenantRoutes } from './inventory/tenants.ts';
import { countRequests } from './ops/http-metrics.ts';
import { opsRoutes, type MetricsSource } from './ops/routes.ts';
import { runRoutes } from './runs/routes.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

export interface AppOptions {
  metricsSources?: MetricsSource[];
  dashboard?: DashboardOptions;
}

/** The whole HTTP surface; the runner and the tests build it the same way, with their own deps. */
export function createApp(deps: Deps, opts: AppOptions = {}) {
  const app = new Hono<AppEnv>();

  app.use(async (c, next) => {
    c.set('deps', deps);
    await next();
  });
  app.use(countRequests);

  app.onError((err, c) => {
    if (err instanceof ApiError) return c.json(errorBody(err), err.status);
    if (err instanceof ActiveRunConflict) {
      return c.json(errorBody(new ApiError(409, 'run_active', err.message, { activeRun: err.activeRunId })), 409);
    }
    if (err instanceof HTTPException) {
      const code = err.status === 413 ? 'body_too_large' : 'http_error';
      return c.json({ error: { code, message: err.message || 'request rejected' } }, err.status);
    }
    deps.log.error('unhandled error', { route: c.req.routePath, error: err instanceof Error ? err.message : String(err) });
    return c.json({ error: { code: 'internal', message: 'internal error' } }, 500);
  });
  app.notFound((c) => c.json({ error: { code: 'not_found', message: 'no such route' } }, 404));

  const v1 = new Hono<AppEnv>();
  v1.use(
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new ApiError(413, 'body_too_large', `request body exceeds ${MAX_BODY_BYTES} bytes`);
      },
    }),
  );
  v1.use(requireAuth);
  v1.route('/tenants', tenantRoutes());
  v1.route('/clusters', clusterRoutes());
  v1.route('/clusters', machineRoutes());
  v1.route('/runs', runRoutes());
  v1.route('/audit', auditRoutes());
  v1.route('/backups', backupRoutes());

  const ops = opsRoutes(opts.metricsSources);
  app.route('/', ops);
  app.route('/v1', v1);
  // The dashboard reaches the API through the app itself, so both run the same handlers.
  app.route('/', dashboardRoutes((req, env) => app.fetch(req, env), opts.dashboard));
  return app;
}

export type App = ReturnType<typeof createApp>;
