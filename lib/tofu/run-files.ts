import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';

export const RUN_DIR_PREFIX = 'run_';

/**
 * Removes run directories left by a process that died mid-run: they hold machine configs.
 * `ended(runId)` says whether a run is over; a run directory of a run still going (another
 * runner on the same data dir) is kept. Directories not named after a run come from older
 * versions and are removed.
 */
export async function removeStaleRunFiles(dataDir: string, ended: (runId: string) => Promise<boolean> = async () => true): Promise<number> {
  const root = path.join(dataDir, 'runs');
  let entries: string[];
  try {
    entries = await readdir(root);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  let removed = 0;
  for (const e of entries) {
    if (e.startsWith(RUN_DIR_PREFIX) && !(await ended(e))) continue;
    await rm(path.join(root, e), { recursive: true, force: true });
    removed++;
  }
  return removed;
}
