import { BACKUP_KIND, backupExecutor } from './backup/index.ts';
import { COLLECT_KIND, collectExecutor, scheduledCollect } from './collect/index.ts';
import type { AppExecutors, Deps } from './deps.ts';
import type { CronJob } from '../runner/cron.ts';
import { pruneStateCredentials, revokeStateCredential } from './state/credentials.ts';
import { PROVISION_KIND, provisionExecutor } from './provision/executor.ts';
import { BOOTSTRAP_KIND, bootstrapExecutor, PUSH_CONFIG_KIND, pushConfigExecutor } from './push-config/index.ts';
import { UPGRADE_KIND, upgradeExecutor } from './upgrade/index.ts';

/** Every run kind the worker can execute, by name. */
export function executors(): AppExecutors {
  return {
    [BACKUP_KIND]: backupExecutor,
    [PROVISION_KIND]: provisionExecutor,
    [COLLECT_KIND]: collectExecutor,
    [PUSH_CONFIG_KIND]: pushConfigExecutor,
    [BOOTSTRAP_KIND]: bootstrapExecutor,
    [UPGRADE_KIND]: upgradeExecutor,
  };
}

/**
 * Clean-up for runs whose worker died (lease expired): a provision run's tofu may have left its
 * state lock behind, and its state credential must stop working.
 */
export async function onRunsInterrupted(deps: Deps, runIds: string[]): Promise<void> {
  for (const id of runIds) await revokeStateCredential(deps, id);
}

/** Scheduled work; each entry is overrun-protected by the cron host. */
export function cronJobs(deps: Deps): CronJob[] {
  return [
    { name: 'state-credentials-prune', pattern: '17 * * * *', run: () => pruneStateCredentials(deps) },
    // Enqueues a pass unless one is active; the worker runs it, so every runner's cron may fire.
    { name: 'collect', pattern: deps.settings.collectCron, run: () => scheduledCollect(deps) },
  ];
}
