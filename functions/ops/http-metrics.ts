import { routePath } from 'hono/route';
import { createMiddleware } from 'hono/factory';
import type { AppEnv } from '../deps.ts';

export interface HttpMetrics {
  record(method: string, route: string, status: number): void;
  snapshot(): { method: string; route: string; status: number; count: number }[];
}

export function createHttpMetrics(): HttpMetrics {
  const counts = new Map<string, number>();
  return {
    record(method, route, status) {
      const key = `${method}\u0000${route}\u0000${status}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    },
    snapshot() {
      return [...counts].map(([key, count]) => {
        const [method = '', route = '', status = '0'] = key.split('\u0000');
        return { method, route, status: Number(status), count };
      });
    },
  };
}

/** Counts by matched route pattern (`/v1/clusters/:id`), never by raw path, to bound cardinality. */
export const countRequests = createMiddleware<AppEnv>(async (c, next) => {
  await next();
  const route = routePath(c, -1) || 'unmatched';
  c.var.deps.metrics.record(c.req.method, c.res.status === 404 && route === '/*' ? 'unmatched' : route, c.res.status);
});

export function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}
