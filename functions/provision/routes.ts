import { and, eq, isNull } from 'drizzle-orm';
import { Hono, type Context } from 'hono';
import { z } from 'zod';
import { provisionPlans, webhookDeliveries } from '../../db/schema/index.ts';
import { canSeeTenant, requireScope } from '../auth.ts';
import { SIGNATURE_HEADER, verifySignature } from '../../lib/auth/webhook.ts';
import { ApiError, conflict, notFound } from '../../lib/http/errors.ts';
import { parseWith, readJson } from '../../lib/http/validate.ts';
import type { AppEnv, Deps } from '../context.ts';
import { loadCluster, type ClusterRow } from '../inventory/load.ts';
import { dnsLabel, idParam } from '../inventory/schemas.ts';
import { publicRun } from '../runs/routes.ts';
import { accepted, enqueueClusterRun } from '../runs/enqueue.ts';
import { currentVersion } from '../state/store.ts';
import { MAX_DELIVERY_ID_CHARS, recordDelivery, setDeliveryRun } from '../webhooks/deliveries.ts';
import { loadWebhookSecret } from '../webhooks/secret.ts';
import { PROVISION_KIND, provisionJob, type ProvisionParams } from './job.ts';

export const provisionBody = z.strictObject({
  mode: z.enum(['plan', 'apply']),
  destroy: z.boolean().optional(),
});

export const hookBody = z.strictObject({
  cluster: z.union([idParam, dnsLabel]),
  mode: z.enum(['plan', 'apply']).default('apply'),
  destroy: z.boolean().optional(),
});

const DELIVERY_HEADERS = ['x-rezus-delivery', 'x-github-delivery'];

const enqueueProvision = (deps: Deps, cluster: ClusterRow, params: ProvisionParams, createdBy: string) =>
  enqueueClusterRun(deps, cluster, provisionJob, params, createdBy);

export function provisionRoutes() {
  const app = new Hono<AppEnv>();
  app.post('/:id/provision', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = await readJson(c, provisionBody);
    const run = await enqueueProvision(c.var.deps, cluster, { mode: body.mode, destroy: body.destroy ?? false }, c.var.principal.tokenId);
    return accepted(c, run);
  });
  return app;
}

/** `POST /v1/runs/:id/approve`: applies exactly the plan that run saved, once, if the state has not moved. */
export function approveRoutes() {
  const app = new Hono<AppEnv>();
  app.post('/:id/approve', requireScope('write'), async (c) => {
    const { jobs, db } = c.var.deps;
    const planRun = await jobs.get(c.req.param('id'));
    if (!planRun || planRun.tenantId === null || !canSeeTenant(c.var.principal, planRun.tenantId)) throw notFound('run');
    const parsed = planRun.kind === PROVISION_KIND ? provisionJob.params.safeParse(planRun.params) : undefined;
    if (!parsed?.success || parsed.data.mode !== 'plan') throw conflict('only a provision plan run can be approved');
    if (planRun.state !== 'succeeded') throw conflict(`the plan run is ${planRun.state}, not succeeded`);
    const plan = await db.select().from(provisionPlans).where(eq(provisionPlans.runId, planRun.id)).get();
    if (!plan) throw conflict('the run saved no plan');
    if (plan.appliedBy) throw conflict('this plan was already approved', { appliedBy: plan.appliedBy });
    const summary = plan.summary;
    if (summary.add + summary.change + summary.destroy === 0) throw conflict('the plan has no changes to apply');
    const now = await currentVersion(c.var.deps, plan.clusterId);
    if ((now?.version ?? null) !== plan.stateVersion) {
      throw new ApiError(409, 'stale_plan', 'the state changed since this plan was made; plan again');
    }
    const cluster = await loadCluster(c, plan.clusterId);
    const run = await enqueueProvision(c.var.deps, cluster, { mode: 'apply', destroy: plan.destroy, planRun: planRun.id }, c.var.principal.tokenId);
    const [taken] = await db
      .update(provisionPlans)
      .set({ appliedBy: run.id })
      .where(and(eq(provisionPlans.runId, planRun.id), isNull(provisionPlans.appliedBy)))
      .returning();
    if (!taken) {
      await jobs.requestCancel(run.id);
      throw conflict('this plan was approved concurrently');
    }
    return accepted(c, run);
  });
  return app;
}

/**
 * `POST /v1/hooks/:tenant/provision`, authenticated by an HMAC of the raw body under the tenant's
 * webhook secret. A delivery id seen before answers with its first run and starts nothing.
 */
export function provisionHookRoutes() {
  const app = new Hono<AppEnv>();
  app.post('/:tenant/provision', async (c: Context<AppEnv>) => {
    const deps = c.var.deps;
    const tenantId = c.req.param('tenant') ?? '';
    const raw = new Uint8Array(await c.req.arrayBuffer());
    // Unknown tenant, no secret and bad signature look the same from outside.
    const secret = /^tn_[a-z2-7]{16}$/.test(tenantId) ? await loadWebhookSecret(deps, tenantId) : null;
    if (!secret || !verifySignature(secret, raw, c.req.header(SIGNATURE_HEADER))) {
      throw new ApiError(401, 'bad_signature', `missing or invalid ${SIGNATURE_HEADER}`);
    }
    const deliveryId = DELIVERY_HEADERS.map((h) => c.req.header(h)).find((v) => v);
    if (!deliveryId || deliveryId.length > MAX_DELIVERY_ID_CHARS) {
      throw new ApiError(400, 'invalid_request', `a delivery id header (X-Rezus-Delivery) of 1–${MAX_DELIVERY_ID_CHARS} characters is required`);
    }
    let json: unknown;
    try {
      json = JSON.parse(new TextDecoder().decode(raw));
    } catch {
      throw new ApiError(400, 'invalid_request', 'request body is not valid JSON');
    }
    const body = parseWith(hookBody, json);
    const cluster = await deps.db.query.clusters.findFirst({
      where: (t, { and, eq, or }) => and(eq(t.tenantId, tenantId), or(eq(t.id, body.cluster), eq(t.name, body.cluster))),
    });
    if (!cluster) throw notFound('cluster');

    const recorded = await recordDelivery(deps, { tenantId, deliveryId });
    if (!recorded.recorded) {
      const first = recorded.existing.runId ? await deps.jobs.get(recorded.existing.runId) : undefined;
      return c.json({ duplicate: true, run: first ? publicRun(first) : null }, 200);
    }
    try {
      const run = await enqueueProvision(deps, cluster, { mode: body.mode, destroy: body.destroy ?? false }, `webhook:${deliveryId}`);
      await setDeliveryRun(deps, tenantId, deliveryId, run.id);
      return accepted(c, run);
    } catch (err) {
      // Nothing started: forget the delivery so a redelivery can try again.
      await deps.db
        .delete(webhookDeliveries)
        .where(and(eq(webhookDeliveries.tenantId, tenantId), eq(webhookDeliveries.deliveryId, deliveryId)));
      throw err;
    }
  });
  return app;
}

