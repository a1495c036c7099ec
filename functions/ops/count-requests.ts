import { createMiddleware } from 'hono/factory';
import { routePath } from 'hono/route';
import type { AppEnv } from '../context.ts';

/** Counts by matched route pattern (`/v1/clusters/:id`), never by raw path, to bound cardinality. */
export const countRequests = createMiddleware<AppEnv>(async (c, next) => {
  await next();
  const route = routePath(c, -1) || 'unmatched';
  c.var.deps.metrics.countRequest(c.req.method, c.res.status === 404 && route === '/*' ? 'unmatched' : route, c.res.status);
});

