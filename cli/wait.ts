import type { Run } from './api-types.ts';
import type { ApiClient } from './client.ts';
import { exitCodeOf, followRun, formatEvent } from './follow.ts';
import { printData, type OutputFormat } from './output.ts';
import { progress } from './session.ts';

/** Exit status of a process stopped with Ctrl-C (128 + SIGINT); the run itself goes on. */
export const INTERRUPTED_EXIT = 130;

/**
 * Streams a run's events until it ends and returns it. Ctrl-C stops following, not the run: it
 * says how to pick the log up again and exits 130.
 */
export async function waitForRun(api: ApiClient, runId: string, format: OutputFormat): Promise<Run> {
  const say = progress(format);
  const abort = new AbortController();
  const onSigint = () => {
    abort.abort();
    process.stderr.write(`\nstopped following; run ${runId} goes on (rezus logs -f ${runId}, rezus cancel ${runId})\n`);
    process.exit(INTERRUPTED_EXIT);
  };
  process.once('SIGINT', onSigint);
  try {
    return await followRun(api, runId, (e) => say(formatEvent(e)), abort.signal);
  } finally {
    process.off('SIGINT', onSigint);
  }
}

/** One line about how a run ended, with what the result says where it is worth saying. */
export function outcomeLine(run: Run): string {
  const r = run.result ?? {};
  const summary = r.summary as { add?: number; change?: number; destroy?: number } | undefined;
  const tail = summary ? ` (${summary.add ?? 0} to add, ${summary.change ?? 0} to change, ${summary.destroy ?? 0} to destroy)` : '';
  if (run.state === 'succeeded') return `run ${run.id} (${run.kind}) succeeded${tail}`;
  return `run ${run.id} (${run.kind}) ${run.state}${run.error ? `: ${run.error}` : ''}`;
}

/** Reports a finished run (human line, or the run as data) and sets the documented exit code. */
export function finishRun(run: Run, format: OutputFormat): void {
  if (format === 'table') console.log(outcomeLine(run));
  else printData(format, run);
  process.exitCode = exitCodeOf(run);
}
