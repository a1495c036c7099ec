import { Hono, type Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import { canSeeTenant, requireScope } from '../auth.ts';
import { notFound } from '../../lib/http/errors.ts';
import { readQuery } from '../../lib/http/validate.ts';
import { isTerminal, type Run } from '../../lib/jobs/types.ts';
import type { AppEnv } from '../context.ts';
import { loadCluster } from '../inventory/load.ts';
import { idParam } from '../inventory/schemas.ts';

export const listQuery = z.strictObject({
  cluster: idParam.optional(),
  limit: z.coerce.number().int().min(1).max(500).optional(),
});
export const eventsQuery = z.strictObject({ after: z.coerce.number().int().min(0).optional() });

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
      return c.json({ run: publicRun(run), events: await jobs.events(run.id, q.after ?? 0) });
    }
    const resumeFrom = Number(c.req.header('last-event-id') ?? q.after ?? 0) || 0;
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
      const flush = async () => {
        for (const e of await jobs.events(run.id, last)) {
          await stream.writeSSE({ id: String(e.seq), event: 'run-event', data: JSON.stringify(e) });
          last = e.seq;
          lastWrite = Date.now();
        }
      };
      try {
        while (!closed) {
          await flush();
          const current = await jobs.get(run.id);
          if (!current || isTerminal(current.state)) {
            // Events written between the read above and the state check are flushed before the end.
            await flush();
            await stream.writeSSE({ event: 'end', data: JSON.stringify(current ? publicRun(current) : null) });
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
