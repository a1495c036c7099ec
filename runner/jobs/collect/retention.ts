// Retention, run at the end of every pass: raw samples older than the raw window are folded into
// hourly aggregates (merged with what an earlier pass already folded into the same hour) and
// deleted in one transaction; hourly rows go after 30 days; finished collect runs after a while,
// since the cron makes one a minute.
import type { Deps } from '../../../functions/context.ts';
import { COLLECT_KIND } from '../../../functions/collect/job.ts';
import { HOUR_MS, rawCutoff } from '../../../functions/collect/window.ts';

export const HOURLY_RETENTION_MS = 30 * 24 * HOUR_MS;
/** Finished collect runs (and their events) are kept this long; their health data lives on in the tables. */
export const COLLECT_RUN_KEEP_MS = 6 * HOUR_MS;

export interface RetentionResult {
  aggregated: number;
  prunedHourly: number;
  prunedRuns: number;
}

export async function applyRetention(deps: Pick<Deps, 'database' | 'settings'>, now: number): Promise<RetentionResult> {
  const cutoff = rawCutoff(deps, now);
  const finishedBefore = now - COLLECT_RUN_KEEP_MS;
  const finishedRuns = `SELECT id FROM runs WHERE kind = ? AND state IN ('succeeded', 'failed', 'canceled', 'interrupted') AND finished_at < ?`;
  const [, deleted, hourly, , runsDeleted] = await deps.database.client.batch(
    [
      {
        sql: `INSERT INTO health_hourly (machine_id, metric, hour, avg, min, max, count)
              SELECT machine_id, metric, ts - (ts % ${HOUR_MS}) AS h, avg(value), min(value), max(value), count(*)
              FROM health_samples WHERE ts < ? GROUP BY machine_id, metric, h
              ON CONFLICT (machine_id, metric, hour) DO UPDATE SET
                avg = (health_hourly.avg * health_hourly.count + excluded.avg * excluded.count) / (health_hourly.count + excluded.count),
                min = min(health_hourly.min, excluded.min),
                max = max(health_hourly.max, excluded.max),
                count = health_hourly.count + excluded.count`,
        args: [cutoff],
      },
      { sql: 'DELETE FROM health_samples WHERE ts < ?', args: [cutoff] },
      { sql: 'DELETE FROM health_hourly WHERE hour < ?', args: [now - HOURLY_RETENTION_MS] },
      { sql: `DELETE FROM run_events WHERE run_id IN (${finishedRuns})`, args: [COLLECT_KIND, finishedBefore] },
      { sql: `DELETE FROM runs WHERE id IN (${finishedRuns})`, args: [COLLECT_KIND, finishedBefore] },
    ],
    'write',
  );
  return { aggregated: deleted?.rowsAffected ?? 0, prunedHourly: hourly?.rowsAffected ?? 0, prunedRuns: runsDeleted?.rowsAffected ?? 0 };
}
