import { createMiddleware } from 'hono/factory';
import { matchedRoutes } from 'hono/route';
import type { AppEnv } from '../context.ts';

/** Counts by matched route pattern (`/v1/clusters/:id`), never by raw path, to bound cardinality. */
export const countRequests = createMiddleware<AppEnv>(async (c, next) => {
  await next();
  // The handler's route, not a catch-all middleware's (`/*`) that also matched.
  const handler = matchedRoutes(c).filter((r) => r.method !== 'ALL' && r.path !== '/*').at(-1);
  c.var.deps.metrics.countRequest(c.req.method, handler?.path ?? 'unmatched', c.res.status);
});
