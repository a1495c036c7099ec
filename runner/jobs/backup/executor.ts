import { chmod, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Deps } from '../../../functions/context.ts';
import type { JobParams } from '../../../lib/jobs/spec.ts';
import type { backupJob } from '../../../functions/backup/job.ts';
import { RunError, type JobExecutor } from '../../../lib/jobs/executor.ts';
import { localPath } from '../../../db/client.ts';
import type { CopyReply, CopyRequest } from './copy-worker.ts';

// The copy's thread: the source file under tsx and vitest, its own entry of the build in dist/
// (scripts/build.mjs; the build rewrites import.meta.url to this module's place under dist/).
const COPY_WORKER = new URL(import.meta.url.endsWith('.ts') ? './copy-worker.ts' : './copy-worker.js', import.meta.url);

/**
 * A consistent copy of the live database via VACUUM INTO, written beside it and renamed into place.
 * The copy runs in a worker thread (./copy-worker.ts): the event loop, so HTTP and every run's
 * heartbeat, keeps turning however long it takes.
 */
export const backupExecutor: JobExecutor<Deps, JobParams<typeof backupJob>> = async ({ deps, emit, signal, run }) => {
  if (!deps.database.local) throw new RunError('backups need the embedded database');
  // Another connection (the copy's thread) can only reach a database in a file.
  if (!localPath(deps.database.url)) throw new RunError('backups need the embedded database in a file');
  const dir = join(deps.settings.dataDir, 'backups');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const stamp = new Date(deps.clock.now()).toISOString().replace(/[:.]/g, '-');
  const file = join(dir, `rezus-${stamp}-${run.id}.db`);
  const partial = `${file}.partial`;
  await emit({ type: 'backup.start', message: 'copying the database', data: { file } });
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
  return { file, bytes: size };
};

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
