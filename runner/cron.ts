import { Cron } from 'croner';
import { errorMessage } from '../lib/errors.ts';
import type { Logger } from '../lib/log.ts';

export interface CronJob {
  name: string;
  pattern: string;
  /** The setting the pattern came from, named when it cannot be read. */
  setting?: string;
  run: () => Promise<unknown>;
}

/**
 * Each job skips a tick while its previous run is still going (croner's `protect`). A pattern
 * croner cannot read stops its own job only: one mistyped schedule must not leave the others
 * (collect, etcd snapshots) silently unscheduled.
 */
export function startCron(jobs: CronJob[], log: Logger): { stop(): void } {
  const crons: Cron[] = [];
  for (const job of jobs) {
    try {
      crons.push(
        new Cron(
          job.pattern,
          {
            name: job.name,
            protect: () => log.warn('cron tick skipped: previous run still in progress', { job: job.name }),
            catch: (err) => log.error('cron job failed', { job: job.name, error: String(err) }),
            unref: false,
          },
          async () => {
            await job.run();
          },
        ),
      );
    } catch (err) {
      log.error('schedule not started: its cron pattern cannot be read', { job: job.name, ...(job.setting ? { setting: job.setting } : {}), error: errorMessage(err) });
    }
  }
  return {
    stop() {
      for (const c of crons) c.stop();
    },
  };
}
