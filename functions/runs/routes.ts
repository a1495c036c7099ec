import { Hono, type Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import { canSeeTenant, requireScope } from '../auth.ts';
import { notFound } from '../../lib/http/errors.ts';
import { parseWith, readQuery } from '../../lib/http/validate.ts';
import type { Jobs } from '../../lib/jobs/queue.ts';
import { isTerminal, type Run } from '../../lib/jobs/types.ts';
import type { AppEnv } from '../context.ts';
import { loadCluster } from '../inventory/load.ts';
import { idParam } from '../inventory/schemas.ts';

export const listQuery = z.strictObject({
  cluster: idParam.optional(),
  limit: z.coerce.number().int().min(1).max(500).optional(),
});
/** How soon a stream that ended on its read budget asks EventSource to reconnect. */
const RECONNECT_AFTER_MS = 500;
/** The most events one read returns: a JSON page, and each of the stream's reads from the database. */
export const EVENTS_PAGE_MAX = 1000;
const notAnEventId = { error: 'must be an event id (a whole number, 0 or more)' };
/** `?after=` and `Last-Event-ID` name the same thing, a run event's seq, so one rule reads both. */
const eventId = z.coerce.number(notAnEventId).int(notAnEventId).min(0, notAnEventId);
export const eventsQuery = z.strictObject({
  after: eventId.optional(),
  limit: z.coerce.number().int().min(1).max(EVENTS_PAGE_MAX).optional(),
});
const lastEventIdHeader = z.object({ 'Last-Event-ID': eventId });

/**
 * Checked before the stream starts: once its 200 is out, a bad id could only end the stream
 * without `end`, which a follower cannot tell from a dropped connection.
 */
function lastEventId(c: Context<AppEnv>): number | undefined {
  const raw = c.req.header('last-event-id');
  // EventSource leaves the header out rather than send it empty, so an empty one counts as absent.
  if (!raw) return undefined;
  return parseWith(lastEventIdHeader, { 'Last-Event-ID': raw })['Last-Event-ID'];
}

/**
 * One page of a run's log. One event more than the page is read, so `more` says whether another
 * page is stored; `next` is the `after` that reads it (or polls a live run). `last` is the seq of
 * the run's last event so far (0: none), so a reader can go straight to a long log's end, where a
 * failed run's error is: `after=last-N` reads its last N events.
 */
async function eventsPage(jobs: Jobs, runId: string, after: number, limit: number) {
  const [rows, last] = await Promise.all([jobs.events(runId, after, limit + 1), jobs.lastEventSeq(runId)]);
  const events = rows.slice(0, limit);
  return { events, more: rows.length > limit, next: events.at(-1)?.seq ?? after, last };
}

export const publicRun = (r: Run) => ({
  id: r.id,
  kind: r.kind,
  tenant: r.tenantId,
  cluster: r.clusterId,
  state: r.state,
  params: r.params,
  result: r.result,
  error: r.error,
  cancelRequested: r.cancelRequested,
  attempt: r.attempt,
  createdBy: r.createdBy,
  createdAt: r.createdAt,
  startedAt: r.startedAt,
  finishedAt: r.finishedAt,
});

export function runRoutes() {
  const app = new Hono<AppEnv>();

  async function loadRun(c: Context<AppEnv>, id: string): Promise<Run> {
    const run = await c.var.deps.jobs.get(id);
    // Admin-only runs (backups) have no tenant and stay hidden from tenant tokens.
    const visible = run && (c.var.principal.admin || (run.tenantId !== null && canSeeTenant(c.var.principal, run.tenantId)));
    if (!run || !visible) throw notFound('run');
    return run;
  }

  app.get('/', requireScope('read'), async (c) => {
    const q = readQuery(c, listQuery);
    if (q.cluster) await loadCluster(c, q.cluster);
    const p = c.var.principal;
    const rows = await c.var.deps.jobs.list({
      tenantId: p.admin ? undefined : p.tenantId!,
      clusterId: q.cluster,
      limit: q.limit,
    });
    return c.json({ runs: rows.map(publicRun) });
  });

  app.get('/:id', requireScope('read'), async (c) => c.json(publicRun(await loadRun(c, c.req.param('id')))));

  app.get('/:id/events', requireScope('read'), async (c) => {
    const run = await loadRun(c, c.req.param('id'));
    const { jobs, bus, settings } = c.var.deps;
    const q = readQuery(c, eventsQuery);
    const wantsStream = (c.req.header('accept') ?? '').includes('text/event-stream');
    if (!wantsStream) {
      return c.json({ run: publicRun(run), ...(await eventsPage(jobs, run.id, q.after ?? 0, q.limit ?? EVENTS_PAGE_MAX)) });
    }
    const resumeFrom = lastEventId(c) ?? q.after ?? 0;
    return streamSSE(c, async (stream) => {
      // A comment first, so the headers go out even while the run is quiet.
      await stream.write(': following run\n\n');
      let last = resumeFrom;
      let closed = false;
      let wake: (() => void) | undefined;
      const unsubscribe = bus.subscribe(run.id, () => wake?.());
      stream.onAbort(() => {
        closed = true;
        wake?.();
      });
      let lastWrite = Date.now();
      let reads = 0;
      // Each database read is counted against settings.streamReads; once they are spent the stream
      // ends without `end`, and the client picks it up after `last` on a fresh request.
      const readsLeft = () => (settings.streamReads ?? Infinity) - reads;
      const read = <T>(fn: () => Promise<T>): Promise<T> => {
        reads++;
        return fn();
      };
      // Reads until a batch comes back short (true: everything stored so far was sent): the read after
      // the end must reach the terminal event however far behind the follower is, and a live follower
      // catches up at once, not a batch per poll.
      const flush = async (): Promise<boolean> => {
        for (;;) {
          if (readsLeft() <= 0) return false;
          const batch = await read(() => jobs.events(run.id, last, EVENTS_PAGE_MAX));
          for (const e of batch) {
            await stream.writeSSE({ id: String(e.seq), event: 'run-event', data: JSON.stringify(e) });
            last = e.seq;
            lastWrite = Date.now();
          }
          if (batch.length < EVENTS_PAGE_MAX) return true;
          if (closed) return false;
        }
      };
      const reconnect = () => stream.write(`retry: ${RECONNECT_AFTER_MS}\n: this stream's reads are spent; reconnect with Last-Event-ID ${last}\n\n`);
      try {
        while (!closed) {
          await flush();
          // Two reads left at least: the state, and the flush of what came before a terminal one.
          if (readsLeft() < 2) {
            await reconnect();
            break;
          }
          const current = await read(() => jobs.get(run.id));
          if (!current || isTerminal(current.state)) {
            // Events written between the read above and the state check are flushed before the end;
            // if the reads run out first, the next request sends the rest and the end.
            if (await flush()) await stream.writeSSE({ event: 'end', data: JSON.stringify(current ? publicRun(current) : null) });
            else if (!closed) await reconnect();
            break;
          }
          // Proxies (Home Assistant ingress among them) drop streams that stay silent too long.
          if (Date.now() - lastWrite >= settings.keepAliveMs) {
            await stream.write(': keep-alive\n\n');
            lastWrite = Date.now();
          }
          await new Promise<void>((resolve) => {
            const t = setTimeout(resolve, settings.followPollMs);
            wake = () => {
              clearTimeout(t);
              resolve();
            };
          });
        }
      } finally {
        unsubscribe();
      }
    });
  });

  app.post('/:id/cancel', requireScope('write'), async (c) => {
    const run = await loadRun(c, c.req.param('id'));
    const updated = await c.var.deps.jobs.requestCancel(run.id);
    return c.json(publicRun(updated ?? run), 202);
  });

  return app;
}
