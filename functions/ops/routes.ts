import { Hono } from 'hono';
import { requireAdmin, requireAuth } from '../auth.ts';
import { migrationStatus } from '../../db/status.ts';
import { RUN_STATES } from '../../db/schema/index.ts';
import type { AppEnv } from '../context.ts';
import { escapeLabel } from './http-metrics.ts';

/** Extra gauges other functions export on /metrics (collect adds node and cluster health). */
export type MetricsSource = (deps: AppEnv['Variables']['deps']) => Promise<string>;

export function opsRoutes(extraMetrics: MetricsSource[] = []) {
  const app = new Hono<AppEnv>();

  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', async (c) => {
    const { database } = c.var.deps;
    try {
      await database.client.execute('SELECT 1');
      const m = await migrationStatus(database.client);
      if (m.applied < m.expected) {
        return c.json({ status: 'not ready', reason: `migrations pending: ${m.applied}/${m.expected} applied` }, 503);
      }
      return c.json({ status: 'ready', migrations: m.applied });
    } catch {
      return c.json({ status: 'not ready', reason: 'database unreachable' }, 503);
    }
  });

  // Node and tenant names are in the labels, so scraping takes the admin token (bearer_token in Prometheus).
  app.get('/metrics', requireAuth, requireAdmin, async (c) => {
    const { jobs, metrics } = c.var.deps;
    const lines: string[] = [];
    const byState = await jobs.countByState();
    lines.push('# HELP rezus_runs Runs by state.', '# TYPE rezus_runs gauge');
    for (const s of RUN_STATES) lines.push(`rezus_runs{state="${s}"} ${byState[s] ?? 0}`);
    lines.push('# HELP rezus_http_requests_total HTTP requests by route and status.', '# TYPE rezus_http_requests_total counter');
    for (const r of metrics.snapshot()) {
      lines.push(
        `rezus_http_requests_total{method="${r.method}",route="${escapeLabel(r.route)}",status="${r.status}"} ${r.count}`,
      );
    }
    for (const source of extraMetrics) lines.push(await source(c.var.deps));
    return c.text(lines.join('\n') + '\n', 200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
  });

  return app;
}
