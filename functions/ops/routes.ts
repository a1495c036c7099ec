import { Hono } from 'hono';
import { requireAdmin, requireAuth } from '../auth.ts';
import { migrationStatus } from '../../db/status.ts';
import type { AppEnv } from '../context.ts';

export function opsRoutes() {
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
    const { body, contentType } = await c.var.deps.metrics.render();
    return c.body(body, 200, { 'content-type': contentType });
  });

  return app;
}
