import { and, eq, isNull } from 'drizzle-orm';
import { Hono, type Context } from 'hono';
import { z } from 'zod';
import { provisionPlans, tenants } from '../../db/schema/index.ts';
import { canSeeTenant, requireScope } from '../auth.ts';
import {
  DELIVERY_HEADER,
  GITHUB_DELIVERY_HEADER,
  GITHUB_SIGNATURE_HEADER,
  SIGNATURE_HEADER,
  SIGNATURE_WINDOW_S,
  TIMESTAMP_HEADER,
  verifyDelivery,
  verifySignature,
} from '../../lib/auth/webhook.ts';
import { ApiError, conflict, notFound } from '../../lib/http/errors.ts';
import { parseWith, readJson } from '../../lib/http/validate.ts';
import type { AppEnv, Deps } from '../context.ts';
import { loadCluster, type ClusterRow } from '../inventory/load.ts';
import { dnsLabel, idParam } from '../inventory/schemas.ts';
import { publicRun } from '../runs/routes.ts';
import { accepted, enqueueClusterRun } from '../runs/enqueue.ts';
import { currentVersion } from '../state/store.ts';
import { findDelivery, insertDelivery, MAX_DELIVERY_ID_CHARS, recordDelivery, releaseRefusal, type Delivery } from '../webhooks/deliveries.ts';
import { loadWebhookSecret } from '../webhooks/secret.ts';
import { PROVISION_KIND, provisionJob, type ProvisionParams } from './job.ts';
import type { Alongside } from '../../lib/jobs/queue.ts';
import { isRefusal } from '../api-error.ts';

export const provisionBody = z.strictObject({
  mode: z.enum(['plan', 'apply']),
  destroy: z.boolean().optional(),
});

export const hookBody = z.strictObject({
  cluster: z.union([idParam, dnsLabel]),
  mode: z.enum(['plan', 'apply']).default('apply'),
  destroy: z.boolean().optional(),
});

const enqueueProvision = (deps: Deps, cluster: Pick<ClusterRow, 'id' | 'tenantId'>, params: ProvisionParams, createdBy: string, alongside?: Alongside) =>
  enqueueClusterRun(deps, cluster, provisionJob, params, createdBy, alongside);

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
    // The apply run and the plan's taking commit together: queued first, a worker could claim the
    // run and find the plan not yet its own, and a crash in between left a run with no plan.
    const run = await enqueueProvision(c.var.deps, cluster, { mode: 'apply', destroy: plan.destroy, planRun: planRun.id }, c.var.principal.tokenId, (id) => [
      db.update(provisionPlans).set({ appliedBy: id }).where(and(eq(provisionPlans.runId, planRun.id), isNull(provisionPlans.appliedBy))),
    ]);
    const taken = await db.select({ appliedBy: provisionPlans.appliedBy }).from(provisionPlans).where(eq(provisionPlans.runId, planRun.id)).get();
    if (taken?.appliedBy !== run.id) {
      // Another approval took it in between: this run finds the plan someone else's and stops.
      await jobs.requestCancel(run.id);
      throw conflict('this plan was approved concurrently');
    }
    return accepted(c, run);
  });
  return app;
}

const hookOptions = z.strictObject({
  mode: z.enum(['plan', 'apply']).default('apply'),
  destroy: z.boolean().optional(),
});
const githubQuery = z.object({ mode: z.enum(['plan', 'apply']).default('apply') });

type HookRequest = {
  deliveryKey: string;
  cluster: string;
  mode: 'plan' | 'apply';
  destroy: boolean;
  /** GitHub only: what its URL asked for, which the signature does not cover (see githubRequest). */
  refusedFor?: string;
};

function parseJsonBody(raw: Uint8Array): unknown {
  const text = new TextDecoder().decode(raw);
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(400, 'invalid_request', 'request body is not valid JSON');
  }
}

/**
 * Authenticates a delivery. RezusCloud's scheme signs timestamp, delivery id and body, so a copy
 * is refused once the 5-minute window has passed and cannot be re-sent under a new delivery id.
 * GitHub's scheme signs only the body, so its delivery key is the signature itself: the same
 * body is acted on once whatever delivery id accompanies it.
 */
function authenticate(c: Context<AppEnv>, secret: string, raw: Uint8Array): { deliveryKey: string; github: boolean } {
  const gh = c.req.header(GITHUB_SIGNATURE_HEADER);
  if (gh !== undefined) {
    const deliveryId = c.req.header(GITHUB_DELIVERY_HEADER);
    if (!deliveryId || deliveryId.length > MAX_DELIVERY_ID_CHARS || !verifySignature(secret, raw, gh)) {
      throw new ApiError(401, 'bad_signature', `missing or invalid ${GITHUB_SIGNATURE_HEADER} or ${GITHUB_DELIVERY_HEADER}`);
    }
    return { deliveryKey: `github:${gh.trim().slice('sha256='.length).toLowerCase()}`, github: true };
  }
  const deliveryId = c.req.header(DELIVERY_HEADER);
  if (deliveryId !== undefined && (deliveryId.length === 0 || deliveryId.length > MAX_DELIVERY_ID_CHARS)) {
    throw new ApiError(400, 'invalid_request', `${DELIVERY_HEADER} must be 1–${MAX_DELIVERY_ID_CHARS} characters`);
  }
  const check = verifyDelivery(
    secret,
    raw,
    { signature: c.req.header(SIGNATURE_HEADER), timestamp: c.req.header(TIMESTAMP_HEADER), deliveryId },
    c.var.deps.clock.now(),
  );
  if (!check.ok) {
    throw check.reason === 'stale'
      ? new ApiError(401, 'stale_signature', `${TIMESTAMP_HEADER} is more than ${SIGNATURE_WINDOW_S} s from the server's clock`)
      : new ApiError(401, 'bad_signature', `missing or invalid ${SIGNATURE_HEADER}, ${TIMESTAMP_HEADER} or ${DELIVERY_HEADER}`);
  }
  return { deliveryKey: deliveryId!, github: false };
}

async function loadHookSecret(c: Context<AppEnv>, tenantId: string): Promise<string> {
  const deps = c.var.deps;
  const tenant = /^tn_[a-z2-7]{16}$/.test(tenantId) ? await deps.db.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId)).get() : undefined;
  if (!tenant) throw notFound('tenant');
  const secret = await loadWebhookSecret(deps, tenantId);
  if (!secret) throw new ApiError(401, 'bad_signature', 'the tenant has no webhook secret; mint one with POST /v1/tenants/:tenant/webhook-secret');
  return secret;
}

/** The cluster a hook names, by id or name, within the tenant. */
async function findHookCluster(deps: Deps, tenantId: string, idOrName: string) {
  const cluster = await deps.db.query.clusters.findFirst({
    where: (t, { and, eq, or }) => and(eq(t.tenantId, tenantId), or(eq(t.id, idOrName), eq(t.name, idOrName))),
  });
  if (!cluster) throw notFound('cluster');
  return cluster;
}

/**
 * Queues the delivery's run and records the delivery, naming the run, in one commit: a crash, a
 * cancelled Worker request or a failed statement leaves both or neither, so a retried delivery
 * either starts its run or finds it, never a record without a run nor a second run. The run is
 * queued as enqueueClusterRun does (exclusive per cluster); a refusal writes nothing.
 */
async function startHookRun(c: Context<AppEnv>, tenantId: string, req: HookRequest) {
  const deps = c.var.deps;
  const cluster = await findHookCluster(deps, tenantId, req.cluster);
  const deliveryId = req.deliveryKey;
  let runId: string | undefined;
  try {
    const run = await enqueueProvision(deps, { id: cluster.id, tenantId }, { mode: req.mode, destroy: req.destroy }, `webhook:${deliveryId}`, (id) => [
      ...(req.refusedFor ? [releaseRefusal(deps, { tenantId, deliveryId, refusedFor: req.refusedFor })] : []),
      insertDelivery(deps, { tenantId, deliveryId, runId: (runId = id) }),
    ]);
    return accepted(c, run);
  } catch (err) {
    // A copy of a recorded delivery failed the batch, or the batch committed and only its answer was lost.
    const recorded = await findDelivery(deps, tenantId, deliveryId);
    if (!recorded) throw err;
    if (recorded.runId === null && recorded.refusedFor !== null) {
      // Refused before. Asked again for the same, this refusal (err) says why; for anything else,
      // these are a refused delivery's bytes sent where GitHub never sent them.
      if (recorded.refusedFor === req.refusedFor) throw err;
      throw reusedDelivery();
    }
    const ours = recorded.runId === runId ? await deps.jobs.get(runId!) : undefined;
    return ours ? accepted(c, ours) : answerDuplicate(c, recorded);
  }
}

const reusedDelivery = (): ApiError =>
  new ApiError(409, 'delivery_reused', 'this GitHub delivery was refused for another cluster or mode; its signature covers only the body, so it starts nothing here');

/**
 * What a GitHub delivery's URL asks for: its cluster and `?mode=`, as sent (valid or not). Neither
 * is signed, so a delivery refused once (its run could not start then) is kept against this, and
 * only the same request may start its run later.
 */
const githubRequest = (c: Context<AppEnv>): string => JSON.stringify([c.req.param('cluster') ?? '', c.req.query('mode') ?? null]);

/**
 * Keeps a GitHub delivery that was refused, with the request it was refused for; the first kept
 * stays. Best effort: nothing recorded leaves the delivery as unseen, as before.
 */
async function keepRefusal(c: Context<AppEnv>, tenantId: string, deliveryKey: string, refusedFor: string): Promise<void> {
  await recordDelivery(c.var.deps, { tenantId, deliveryId: deliveryKey, refusedFor }).catch(() => undefined);
}

/** `200 {duplicate: true, run}`: a delivery seen before, with the run it started (null if none). */
async function answerDuplicate(c: Context<AppEnv>, delivery: Delivery) {
  const first = delivery.runId ? await c.var.deps.jobs.get(delivery.runId) : undefined;
  return c.json({ duplicate: true, run: first ? publicRun(first) : null }, 200);
}

// `ref` and `after` are in a push's payload and in no other event's.
const githubPush = z.object({ ref: z.string(), after: z.string() });

function isPushPayload(raw: Uint8Array): boolean {
  try {
    return githubPush.safeParse(JSON.parse(new TextDecoder().decode(raw))).success;
  } catch {
    return false;
  }
}

/**
 * Why a GitHub delivery starts no run, if it does not. Neither the event header nor `?mode=` is
 * signed, so the signed body must be a push's too: pings answered before every delivery was
 * recorded are still in GitHub's delivery log, and must not pass for a push.
 */
function githubIgnoreReason(event: string | undefined, raw: Uint8Array): string | undefined {
  if (event !== 'push') return 'only push events start a run';
  if (!isPushPayload(raw)) return "the body is not GitHub's JSON push payload (content type application/json)";
  return undefined;
}

/**
 * Answers a GitHub delivery that starts nothing (a ping, any other event). Its key is recorded
 * all the same, so its bytes resent later as a push with `?mode=apply` are a duplicate: GitHub's
 * scheme has no timestamp, and anyone who saw a delivery (its log, a proxy's) has its signature.
 */
async function ignoreDelivery(c: Context<AppEnv>, tenantId: string, deliveryKey: string, event: string | undefined, reason: string) {
  const recorded = await recordDelivery(c.var.deps, { tenantId, deliveryId: deliveryKey });
  if (!recorded.recorded) return answerDuplicate(c, recorded.existing);
  return c.json({ ok: true, event: event ?? null, ignored: true, reason }, 200);
}

/**
 * Webhooks, authenticated by an HMAC under the tenant's webhook secret (see README, "Webhook"):
 * `POST /v1/hooks/:tenant/provision` (cluster in the body) and
 * `POST /v1/hooks/:tenant/clusters/:cluster/provision` (cluster in the URL; also takes GitHub's
 * own `X-Hub-Signature-256`, mode from `?mode=`; only a push starts a run). Delivery ids are kept
 * (nothing prunes them), far longer than the signature window; a delivery seen before answers with
 * its first run.
 */
export function provisionHookRoutes() {
  const app = new Hono<AppEnv>();
  app.post('/:tenant/provision', async (c: Context<AppEnv>) => {
    const tenantId = c.req.param('tenant') ?? '';
    const raw = new Uint8Array(await c.req.arrayBuffer());
    const secret = await loadHookSecret(c, tenantId);
    const auth = authenticate(c, secret, raw);
    if (auth.github) throw new ApiError(400, 'invalid_request', 'GitHub deliveries name the cluster in the URL: /v1/hooks/:tenant/clusters/:cluster/provision');
    const body = parseWith(hookBody, parseJsonBody(raw));
    return startHookRun(c, tenantId, { deliveryKey: auth.deliveryKey, cluster: body.cluster, mode: body.mode, destroy: body.destroy ?? false });
  });

  app.post('/:tenant/clusters/:cluster/provision', async (c: Context<AppEnv>) => {
    const tenantId = c.req.param('tenant') ?? '';
    const clusterParam = z.union([idParam, dnsLabel]);
    const raw = new Uint8Array(await c.req.arrayBuffer());
    const secret = await loadHookSecret(c, tenantId);
    const auth = authenticate(c, secret, raw);
    if (auth.github) {
      const event = c.req.header('x-github-event');
      const ignored = githubIgnoreReason(event, raw);
      if (ignored) return ignoreDelivery(c, tenantId, auth.deliveryKey, event, ignored);
      const refusedFor = githubRequest(c);
      try {
        const cluster = parseWith(clusterParam, c.req.param('cluster'));
        const q = parseWith(githubQuery, c.req.query());
        return await startHookRun(c, tenantId, { deliveryKey: auth.deliveryKey, cluster, mode: q.mode, destroy: false, refusedFor });
      } catch (err) {
        // A failure to act on it (a 5xx) leaves the delivery unseen, to be retried as it is.
        if (isRefusal(err)) await keepRefusal(c, tenantId, auth.deliveryKey, refusedFor);
        throw err;
      }
    }
    const cluster = parseWith(clusterParam, c.req.param('cluster'));
    const body = parseWith(hookOptions, parseJsonBody(raw) ?? {});
    return startHookRun(c, tenantId, { deliveryKey: auth.deliveryKey, cluster, mode: body.mode, destroy: body.destroy ?? false });
  });
  return app;
}
