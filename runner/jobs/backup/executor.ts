import { chmod, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Deps } from '../../../functions/context.ts';
import type { JobParams } from '../../../lib/jobs/spec.ts';
import type { backupJob } from '../../../functions/backup/job.ts';
import { RunError, type JobExecutor } from '../../../lib/jobs/executor.ts';

/** A consistent copy of the live database via VACUUM INTO, written beside it and renamed into place. */
export const backupExecutor: JobExecutor<Deps, JobParams<typeof backupJob>> = async ({ deps, emit, signal, run }) => {
  if (!deps.database.local) throw new RunError('backups need the embedded database');
  const dir = join(deps.settings.dataDir, 'backups');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const stamp = new Date(deps.clock.now()).toISOString().replace(/[:.]/g, '-');
  const file = join(dir, `rezus-${stamp}-${run.id}.db`);
  const partial = `${file}.partial`;
  await emit({ type: 'backup.start', message: 'copying the database', data: { file } });
  signal.throwIfAborted();
  try {
    await deps.database.client.execute({ sql: 'VACUUM INTO ?', args: [partial] });
    // A backup is the whole database (sealed secrets, state): owner-only like the database.
    await chmod(partial, 0o600);
    await rename(partial, file);
  } catch (err) {
    await rm(partial, { force: true });
    throw err;
  }
  const { size } = await stat(file);
  await emit({ type: 'backup.done', message: `backup written (${size} bytes)`, data: { file, bytes: size } });
  return { file, bytes: size };
};

/** A backup cut short by a crash leaves its `.partial`; at start nothing can be writing one of ours. */
export async function removePartialBackups(dataDir: string): Promise<number> {
  let entries: string[];
  try {
    entries = await readdir(join(dataDir, 'backups'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  const partial = entries.filter((e) => e.endsWith('.partial'));
  for (const e of partial) await rm(join(dataDir, 'backups', e), { force: true });
  return partial.length;
}
