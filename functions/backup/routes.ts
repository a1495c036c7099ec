import { Hono } from 'hono';
import { requireAdmin } from '../auth.ts';
import { ApiError } from '../../lib/http/errors.ts';
import type { AppEnv } from '../context.ts';
import { publicRun } from '../runs/routes.ts';
import { backupJob } from './job.ts';

export function backupRoutes() {
  const app = new Hono<AppEnv>();
  app.post('/', requireAdmin, async (c) => {
    if (!c.var.deps.database.local) {
      throw new ApiError(409, 'not_supported', 'backups are taken of the embedded database; back up a remote libsql database with its own tools');
    }
    const run = await backupJob.enqueue(c.var.deps.jobs, {}, { exclusive: false, createdBy: c.var.principal.tokenId });
    return c.json({ run: publicRun(run) }, 202);
  });
  return app;
}
