import { chmod, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Deps } from '../../../functions/context.ts';
import type { JobParams } from '../../../lib/jobs/spec.ts';
import type { backupJob } from '../../../functions/backup/job.ts';
import { DEFAULT_BACKUP_KEEP, type BackupFiles } from '../../../functions/backup/files.ts';
import { RunError, type JobExecutor, type RunContext } from '../../../lib/jobs/executor.ts';
import { localPath } from '../../../db/client.ts';
import { formatBytes } from '../../../lib/bytes.ts';
import { errorMessage } from '../../../lib/errors.ts';
import { nodeBackupFiles } from '../../backup-files.ts';
import type { CopyReply, CopyRequest } from './copy-worker.ts';

// The copy's thread: the source file under tsx and vitest, its own entry of the build in dist/
// (scripts/build.mjs; the build rewrites import.meta.url to this module's place under dist/).
const COPY_WORKER = new URL(import.meta.url.endsWith('.ts') ? './copy-worker.ts' : './copy-worker.js', import.meta.url);

// Room left free beyond the copy itself: the runner keeps writing while the copy runs (its WAL
// grows until the next checkpoint, and a large database's copy takes minutes on an SD card),
// SQLite keeps a journal beside the copy, and the disk is not ours alone: on Home Assistant it is
// the one Home Assistant runs from, whose database, logs and updates must not find it full
// because of a backup. A tenth of the database follows the writes, which grow with the copy's
// time and so with the database; the floor keeps a small database's backup off the disk's last room.
const SPACE_MARGIN_SHARE = 0.1;
const SPACE_MARGIN_MIN_BYTES = 128 * 1024 * 1024;

/**
 * A consistent copy of the live database via VACUUM INTO, written beside it and renamed into place.
 * The copy runs in a worker thread (./copy-worker.ts): the event loop, so HTTP and every run's
 * heartbeat, keeps turning however long it takes. It starts only with room for it on the disk,
 * and once it is written the oldest backups beyond the count to keep are deleted.
 */
export const backupExecutor: JobExecutor<Deps, JobParams<typeof backupJob>> = async ({ deps, emit, signal, run }, params) => {
  if (!deps.database.local) throw new RunError('backups need the embedded database');
  // Another connection (the copy's thread) can only reach a database in a file.
  const source = localPath(deps.database.url);
  if (!source) throw new RunError('backups need the embedded database in a file');
  const dir = join(deps.settings.dataDir, 'backups');
  // The host's backup files (runner/host.ts keeps them in this same directory): the free space
  // is measured, and old backups are pruned, the way the API lists and deletes them.
  const files = deps.backups ?? nodeBackupFiles(dir);
  const space = await checkFreeSpace(source, dir, files);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const stamp = new Date(deps.clock.now()).toISOString().replace(/[:.]/g, '-');
  const file = join(dir, `rezus-${stamp}-${run.id}.db`);
  const partial = `${file}.partial`;
  await emit({ type: 'backup.start', message: 'copying the database', data: { file, ...space } });
  signal.throwIfAborted();
  // Removes its own leftovers when it fails or the run ends first.
  await copyInWorker({ url: deps.database.url, target: partial }, signal);
  try {
    // Canceled after the copy was written: it is not listed either.
    signal.throwIfAborted();
    // A backup is the whole database (sealed secrets, state): owner-only like the database.
    await chmod(partial, 0o600);
    await rename(partial, file);
    // The rename itself is on disk before the run says the backup is written.
    await syncDir(dir);
  } catch (err) {
    await removeCopy(partial);
    throw err;
  }
  const { size } = await stat(file);
  await emit({ type: 'backup.done', message: `backup written (${size} bytes)`, data: { file, bytes: size } });
  const keep = params.keep ?? deps.settings.backupKeep ?? DEFAULT_BACKUP_KEEP;
  const pruned = await pruneBackups(files, basename(file), keep, emit);
  return { file, bytes: size, keep, pruned };
};

/**
 * Fails the run before anything is written when the backups' file system has no room for the
 * copy and the margin. VACUUM INTO writes only the live pages, and every one of them is in the
 * database file or, not yet checkpointed, in its WAL: the two files' sizes bound the copy.
 */
async function checkFreeSpace(source: string, dir: string, files: BackupFiles): Promise<{ estimate: number; needed: number; free: number }> {
  const estimate = (await sizeOf(source)) + (await sizeOf(`${source}-wal`));
  const margin = Math.max(Math.ceil(estimate * SPACE_MARGIN_SHARE), SPACE_MARGIN_MIN_BYTES);
  const needed = estimate + margin;
  const free = await files.freeBytes();
  if (free < needed) {
    throw new RunError(
      `not enough free space for a backup: it needs ${formatBytes(needed)} (the database and its WAL, ${formatBytes(estimate)}, ` +
        `and ${formatBytes(margin)} to spare) and the file system of ${dir} has ${formatBytes(free)} free; nothing was written. ` +
        'Delete old backups (DELETE /v1/backups/:name) or make room on that disk',
    );
  }
  return { estimate, needed, free };
}

async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
}

/**
 * Deletes the oldest backups beyond `keep`, never the one just written (it counts as one of those
 * kept wherever its time sorts it: a clock set back must not make it the oldest). Only names the
 * backups are written under are listed, so a copy still under its `.partial` name is never seen.
 * The backup is written already: a failure here is a warning of the run, not its failure.
 */
async function pruneBackups(files: BackupFiles, written: string, keep: number, emit: RunContext<Deps>['emit']): Promise<string[]> {
  const removed: string[] = [];
  const failed: string[] = [];
  try {
    const older = (await files.list()).filter((f) => f.name !== written).slice(Math.max(keep - 1, 0));
    for (const f of older) {
      try {
        if (await files.remove(f.name)) removed.push(f.name);
      } catch (err) {
        failed.push(`${f.name}: ${errorMessage(err)}`);
      }
    }
  } catch (err) {
    failed.push(errorMessage(err));
  }
  if (removed.length) {
    await emit({ type: 'backup.pruned', message: `deleted ${removed.length} old backup${removed.length === 1 ? '' : 's'} (keeping ${keep}): ${removed.join(', ')}`, data: { keep, removed } });
  }
  if (failed.length) {
    await emit({ level: 'warn', type: 'backup.prune.failed', message: `old backups not deleted (keeping ${keep}): ${failed.join('; ')}`, data: { keep, failed } });
  }
  return removed;
}

/**
 * Runs the copy in a worker thread; settles once the copy is on disk (fsynced, still under its
 * temporary name). The run's signal ends the wait at once and asks the thread to stop: a statement
 * already in SQLite runs to its end first (see CopyRequest.stop), so whatever the thread wrote is
 * removed once it has exited, never while SQLite may still write it. A runner that exits first
 * leaves it to the next start (removePartialBackups).
 */
function copyInWorker(request: Omit<CopyRequest, 'stop'>, signal: AbortSignal): Promise<void> {
  const stop = new SharedArrayBuffer(4);
  const worker = new Worker(COPY_WORKER, { workerData: { ...request, stop } satisfies CopyRequest });
  let kept = false;
  const exited = new Promise<void>((resolve) => {
    worker.once('exit', () => {
      if (kept) resolve();
      else removeCopy(request.target).catch(() => undefined).then(resolve, resolve);
    });
  });
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      Atomics.store(new Int32Array(stop), 0, 1);
      reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
    };
    const fail = (err: Error) => {
      signal.removeEventListener('abort', onAbort);
      void exited.then(() => reject(err));
    };
    worker.on('message', (m: CopyReply) => {
      if (m.type === 'done') {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) return;
        kept = true;
        resolve();
      } else if (m.type === 'failed') fail(new Error(m.message));
      else if (m.type === 'stopped') fail(new Error('the backup was stopped'));
    });
    worker.once('error', fail);
    worker.once('exit', (code) => fail(new Error(`the backup's copy thread stopped (exit code ${code})`)));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** An unfinished copy and the rollback journal SQLite keeps beside it while it writes. */
const PARTIAL = /\.partial(-journal|-wal|-shm)?$/;

async function removeCopy(partial: string): Promise<void> {
  await Promise.all(['', '-journal', '-wal', '-shm'].map((suffix) => rm(partial + suffix, { force: true })));
}

/**
 * A backup cut short by a crash leaves its `.partial` (and SQLite's `.partial-journal`); at start
 * nothing can be writing one of ours.
 */
export async function removePartialBackups(dataDir: string): Promise<number> {
  let entries: string[];
  try {
    entries = await readdir(join(dataDir, 'backups'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  const partial = entries.filter((e) => PARTIAL.test(e));
  for (const e of partial) await rm(join(dataDir, 'backups', e), { force: true });
  return partial.length;
}
