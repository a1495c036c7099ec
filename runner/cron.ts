import { Cron } from 'croner';
import type { Logger } from '../lib/log.ts';

export interface CronJob {
  name: string;
  pattern: string;
  run: () => Promise<unknown>;
}

/** Each job skips a tick while its previous run is still going (croner's `protect`). */
export function startCron(jobs: CronJob[], log: Logger): { stop(): void } {
  const crons = jobs.map(
    (job) =>
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
  return {
    stop() {
      for (const c of crons) c.stop();
    },
  };
}
