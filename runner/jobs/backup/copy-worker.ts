// The backup's copy, in a worker thread (started by ./executor.ts). The embedded database's driver
// is synchronous: a VACUUM INTO of a database of several GB takes minutes on an SD card, and run on
// the runner's event loop it stopped HTTP and every run's heartbeat for that long. Here it blocks
// only this thread, on a connection of its own to the same file (the same driver, so the same
// SQLite and its locks: a second SQLite library in one process, node:sqlite's, would break the
// POSIX locks the two share). In WAL mode the copy is a reader: the runner keeps writing meanwhile.
//
// Loaded as TypeScript from the source tree (Node strips the types) and as
// dist/runner/jobs/backup/copy-worker.js from the build (an entry of scripts/build.mjs), so it
// imports no module of the tree, and keeps to type syntax Node can strip.
import { closeSync, fsyncSync, openSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { createClient } from '@libsql/client/sqlite3';

export interface CopyRequest {
  /** The database's `file:` URL, as the runner opened it. */
  url: string;
  /** Where the copy goes; must not exist. */
  target: string;
  /**
   * One Int32 the runner sets to 1 when the run is canceled: the thread stops before and after
   * the copy's statement. It is never terminated instead: a thread stopped while the driver's
   * call runs takes the process down (libsql panics when it cannot throw the call's error).
   */
  stop: SharedArrayBuffer;
}

export type CopyReply = { type: 'copying' } | { type: 'done' } | { type: 'stopped' } | { type: 'failed'; message: string };

const { url, target, stop } = workerData as CopyRequest;
const reply = (m: CopyReply) => parentPort!.postMessage(m);
class Stop extends Error {}
const stopped = () => Atomics.load(new Int32Array(stop), 0) !== 0;

try {
  // Created empty (VACUUM INTO writes into an empty file) and owner-only before a byte is in it.
  closeSync(openSync(target, 'wx', 0o600));
  const client = createClient({ url });
  try {
    await client.execute('PRAGMA busy_timeout = 5000');
    if (stopped()) throw new Stop();
    reply({ type: 'copying' });
    await client.execute({ sql: 'VACUUM INTO ?', args: [target] });
  } finally {
    client.close();
  }
  if (stopped()) throw new Stop();
  // VACUUM INTO does not sync its output: the copy is on disk before it is renamed into the list.
  const fd = openSync(target, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  reply({ type: 'done' });
} catch (err) {
  reply(err instanceof Stop ? { type: 'stopped' } : { type: 'failed', message: err instanceof Error ? err.message : String(err) });
}
