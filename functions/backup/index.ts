import { Hono } from 'hono';
import { mkdir, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { requireAdmin } from '../../lib/auth/middleware.ts';
import { ApiError } from '../../lib/http/errors.ts';
import { RunError, type Executor } from '../../lib/jobs/executor.ts';
import type { AppEnv, Deps } from '../deps.ts';
import { publicRun } from '../runs/routes.ts';

export const BACKUP_KIND = 'backup';

export function backupRoutes() {
  const app = new Hono<AppEnv>();
  app.post('/', requireAdmin, async (c) => {
    if (!c.var.deps.database.local) {
      throw new ApiError(409, 'not_supported', 'backups are taken of the embedded database; back up a remote libsql database with its own tools');
    }
    const run = await c.var.deps.jobs.enqueue({ kind: BACKUP_KIND, exclusive: false, createdBy: c.var.principal.tokenId });
    return c.json({ run: publicRun(run) }, 202);
  });
  return app;
}

/** A consistent copy of the live database via VACUUM INTO, written beside it and renamed into place. */
export const backupExecutor: Executor<Deps> = async ({ deps, emit, signal, run }) => {
  if (!deps.database.local) throw new RunError('backups need the embedded database');
  const dir = join(deps.settings.dataDir, 'backups');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const stamp = new Date(deps.clock.now()).toISOString().replace(/[:.]/g, '-');
  const file = join(dir, `rezus-${stamp}-${run.id}.db`);
  const partial = `${file}.partial`;
  await emit({ type: 'backup.start', message: 'copying the database', data: { file } });
  signal.throwIfAborted();
  await deps.database.client.execute({ sql: 'VACUUM INTO ?', args: [partial] });
  await rename(partial, file);
  const { size } = await stat(file);
  await emit({ type: 'backup.done', message: `backup written (${size} bytes)`, data: { file, bytes: size } });
  return { file, bytes: size };
};
