import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { ApiClient } from './client.ts';
import { ApiFailure } from './client.ts';
import { TERMINAL, type Run, type RunEvent } from './api-types.ts';
import { CliError, EXIT, type ExitCode } from './exit.ts';

const MAX_RECONNECTS = 10;
const RECONNECT_DELAY_MS = 500;

/**
 * Follows `GET /v1/runs/:id/events` as Server-Sent Events until the server's `end` event, handing
 * each run event to `onEvent` once (a dropped stream resumes after the last seen id), and returns
 * the run as it ended.
 */
export async function followRun(api: ApiClient, runId: string, onEvent: (e: RunEvent) => void, signal?: AbortSignal): Promise<Run> {
  let lastId = 0;
  let failures = 0;
  for (;;) {
    try {
      const res = await api.raw('GET', `/v1/runs/${runId}/events`, {
        accept: 'text/event-stream',
        headers: lastId ? { 'last-event-id': String(lastId) } : {},
        signal,
      });
      if (!res.body) throw new Error('the event stream has no body');
      const events = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
      const reader = events.getReader();
      for (;;) {
        const { value: msg, done } = await reader.read();
        if (done) break;
        if (msg.event === 'end') {
          const run = JSON.parse(msg.data) as Run | null;
          return run ?? (await api.json<Run>('GET', `/v1/runs/${runId}`));
        }
        if (msg.event !== 'run-event') continue;
        const e = JSON.parse(msg.data) as RunEvent;
        if (e.seq <= lastId) continue;
        lastId = e.seq;
        failures = 0;
        onEvent(e);
      }
      // The stream closed without `end` (a proxy timeout, a runner restart): pick it up again.
    } catch (err) {
      if (signal?.aborted || err instanceof ApiFailure) throw err;
      if (++failures > MAX_RECONNECTS) throw new CliError(EXIT.api, `lost the event stream of ${runId}: ${(err as Error).message}`);
    }
    const run = await api.json<Run>('GET', `/v1/runs/${runId}`);
    if (TERMINAL.includes(run.state)) {
      // Print what was missed before the end, then stop.
      await readRest(api, runId, lastId, onEvent);
      return run;
    }
    await new Promise((r) => setTimeout(r, RECONNECT_DELAY_MS));
  }
}

/** A page of `GET /v1/runs/:id/events` as JSON; `more` and `next` are missing from older servers. */
interface EventsPage {
  events: RunEvent[];
  more?: boolean;
  next?: number;
}

/** Hands on every stored event after `after`, page by page: one answer holds at most a page. */
export async function readRest(api: ApiClient, runId: string, after: number, onEvent: (e: RunEvent) => void): Promise<void> {
  for (;;) {
    const page = await api.json<EventsPage>('GET', `/v1/runs/${runId}/events`, { query: { after } });
    for (const e of page.events) onEvent(e);
    // An older server never says `more`; a cursor that did not move would loop forever.
    if (!page.more || page.next === undefined || page.next <= after) return;
    after = page.next;
  }
}

export function formatEvent(e: RunEvent): string {
  const at = e.at ? new Date(e.at).toISOString().slice(11, 19) : '--:--:--';
  const level = e.level && e.level !== 'info' ? ` ${e.level.toUpperCase()}` : '';
  return `${at}${level} ${e.type}: ${e.message}`;
}

/** The documented meaning of a run's end state as an exit code. */
export function exitCodeOf(run: Pick<Run, 'state'>): ExitCode {
  if (run.state === 'succeeded') return EXIT.ok;
  if (run.state === 'failed') return EXIT.runFailed;
  return EXIT.runCanceled;
}
