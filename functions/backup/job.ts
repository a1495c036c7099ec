import { z } from 'zod';
import { defineJob } from '../../lib/jobs/spec.ts';
import { ActiveRunConflict } from '../../lib/jobs/queue.ts';
import type { Run } from '../../lib/jobs/types.ts';
import type { Deps } from '../context.ts';
import { DEFAULT_BACKUP_KEEP } from './files.ts';

/** A consistent copy of the embedded database (runner/jobs/backup). */
export const backupJob = defineJob(
  'backup',
  z.strictObject({
    /**
     * Backup files kept; older ones are deleted after a successful backup. Absent in runs queued
     * before there was pruning: those take the host's setting.
     */
    keep: z.number().int().min(1).optional(),
  }),
);

// One backup queued or running at a time, across every runner sharing the database: two copies
// at once would each pass the free-space check against the same free space, and a schedule that
// fires while a copy (minutes on an SD card) is still going has nothing to add.
export const BACKUP_LOCK = 'backup';

/** Queues a backup; throws ActiveRunConflict while another is queued or running. */
export function enqueueBackup(deps: Pick<Deps, 'jobs' | 'settings'>, createdBy: string): Promise<Run> {
  return backupJob.enqueue(deps.jobs, { keep: deps.settings.backupKeep ?? DEFAULT_BACKUP_KEEP }, { exclusive: true, lockKey: BACKUP_LOCK, createdBy });
}

/** The cron tick: a backup unless one is already active (then this tick is skipped). */
export async function scheduledBackup(deps: Pick<Deps, 'jobs' | 'settings' | 'log' | 'database'>): Promise<Run | undefined> {
  if (!deps.database.local) {
    deps.log.warn('scheduled backup skipped: backups are taken of the embedded database, and this runner uses a remote one');
    return undefined;
  }
  try {
    return await enqueueBackup(deps, 'cron');
  } catch (err) {
    if (err instanceof ActiveRunConflict) {
      deps.log.warn('scheduled backup skipped: a backup is still queued or running', { run: err.activeRunId });
      return undefined;
    }
    throw err;
  }
}
