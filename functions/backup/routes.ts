import { Hono } from 'hono';
import { requireAdmin } from '../auth.ts';
import { recordAudit } from '../audit/record.ts';
import { ApiError, notFound } from '../../lib/http/errors.ts';
import { BACKUP_NAME } from './files.ts';
import type { AppEnv } from '../context.ts';
import { publicRun } from '../runs/routes.ts';
import { enqueueBackup } from './job.ts';

export function backupRoutes() {
  const app = new Hono<AppEnv>();
  app.post('/', requireAdmin, async (c) => {
    if (!c.var.deps.database.local) {
      throw new ApiError(409, 'not_supported', 'backups are taken of the embedded database; back up a remote libsql database with its own tools');
    }
    // A backup already queued or running answers 409 run_active (the app's error handler).
    const run = await enqueueBackup(c.var.deps, c.var.principal.tokenId);
    return c.json({ run: publicRun(run) }, 202);
  });

  const files = (c: { var: AppEnv['Variables'] }) => {
    const store = c.var.deps.backups;
    if (!store) throw new ApiError(409, 'not_supported', 'this host keeps no backup files');
    return store;
  };
  app.get('/', requireAdmin, async (c) => c.json({ backups: await files(c).list() }));
  app.get('/:name', requireAdmin, async (c) => {
    const name = c.req.param('name');
    if (!BACKUP_NAME.test(name)) throw notFound('backup');
    const found = await files(c).open(name);
    if (!found) throw notFound('backup');
    return new Response(found.body, {
      status: 200,
      headers: {
        'content-type': 'application/octet-stream',
        'content-length': String(found.file.bytes),
        'content-disposition': `attachment; filename="${found.file.name}"`,
        'cache-control': 'no-store',
      },
    });
  });
  app.delete('/:name', requireAdmin, async (c) => {
    const name = c.req.param('name');
    if (!BACKUP_NAME.test(name)) throw notFound('backup');
    if (!(await files(c).remove(name))) throw notFound('backup');
    await recordAudit(c, { action: 'backup.delete', target: name });
    return c.body(null, 204);
  });
  return app;
}
