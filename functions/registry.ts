import { BACKUP_KIND, backupExecutor } from './backup/index.ts';
import type { AppExecutors, Deps } from './deps.ts';
import type { CronJob } from '../runner/cron.ts';
import { pruneStateCredentials } from './state/credentials.ts';

/** Every run kind the worker can execute, by name. */
export function executors(): AppExecutors {
  return {
    [BACKUP_KIND]: backupExecutor,
  };
}

/** Scheduled work; each entry is overrun-protected by the cron host. */
export function cronJobs(deps: Deps): CronJob[] {
  return [{ name: 'state-credentials-prune', pattern: '17 * * * *', run: () => pruneStateCredentials(deps) }];
}
