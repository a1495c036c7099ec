import { Hono } from 'hono';
import { z } from 'zod';
import { requireScope } from '../auth.ts';
import { ApiError } from '../../lib/http/errors.ts';
import { readJson, readQuery } from '../../lib/http/validate.ts';
import type { AppEnv } from '../context.ts';
import { loadCluster, loadMachine } from '../inventory/load.ts';
import { idParam } from '../inventory/schemas.ts';
import { publicRun } from '../runs/routes.ts';
import { clusterHealthView, machineSamples } from './views.ts';
import { enqueueCollect } from './job.ts';
import { ActiveRunConflict } from '../../lib/jobs/queue.ts';

export const collectBody = z.strictObject({ cluster: idParam.optional() });

/**
 * POST /v1/collect {cluster?}. An admin gets 202 {run}, or 409 naming the active pass. A tenant's
 * request never holds the pass lock for itself: it coalesces into the queued or running pass, or
 * starts a pass over the whole fleet (which covers its clusters and every other tenant's), so
 * neither cron ticks nor other tenants wait behind it. Its answer names no run it cannot see.
 */
export function collectRoutes() {
  const app = new Hono<AppEnv>();
  app.post('/', requireScope('write'), async (c) => {
    const hasBody = !!c.req.header('content-type') || (c.req.header('content-length') ?? '0') !== '0';
    const body = hasBody ? await readJson(c, collectBody) : {};
    const p = c.var.principal;
    let clusterId: string | undefined;
    let tenantId: string | undefined;
    if (body.cluster) {
      const cluster = await loadCluster(c, body.cluster);
      clusterId = cluster.id;
      tenantId = cluster.tenantId;
    }
    if (!p.admin) {
      try {
        await enqueueCollect(c.var.deps, { createdBy: p.tokenId });
        return c.json({ queued: true, coalesced: false }, 202);
      } catch (err) {
        if (err instanceof ActiveRunConflict) return c.json({ queued: true, coalesced: true }, 202);
        throw err;
      }
    }
    const run = await enqueueCollect(c.var.deps, { clusterId, tenantId, createdBy: p.tokenId });
    return c.json({ run: publicRun(run) }, 202);
  });
  return app;
}

export const samplesQuery = z.strictObject({
  since: z
    .string()
    .transform((v, ctx) => {
      const t = /^\d+$/.test(v) ? Number(v) : Date.parse(v);
      if (!Number.isFinite(t)) {
        ctx.addIssue({ code: 'custom', message: 'must be epoch milliseconds or an ISO 8601 time' });
        return z.NEVER;
      }
      return t;
    })
    .optional(),
  metric: z.string().regex(/^[a-z0-9_.]{1,64}$/, 'is not a metric name').optional(),
  resolution: z.enum(['raw', 'hour']).optional(),
});

/** GET /v1/clusters/:id/health and GET /v1/clusters/:id/machines/:mid/samples. */
export function healthRoutes() {
  const app = new Hono<AppEnv>();
  app.get('/:id/health', requireScope('read'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    return c.json(await clusterHealthView(c.var.deps, cluster.id));
  });
  app.get('/:id/machines/:mid/samples', requireScope('read'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const machine = await loadMachine(c, cluster, c.req.param('mid'));
    const q = readQuery(c, samplesQuery);
    const now = c.var.deps.clock.now();
    const since = q.since ?? now - 3_600_000;
    if (since > now) throw new ApiError(400, 'invalid_request', 'since: must not be in the future', { field: 'since' });
    const result = await machineSamples(c.var.deps, machine.id, { since, ...(q.metric ? { metric: q.metric } : {}), ...(q.resolution ? { resolution: q.resolution } : {}) });
    return c.json({ machine: machine.id, since, ...result });
  });
  return app;
}
