import { eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { machines } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { ApiError, badRequest, conflict } from '../../lib/http/errors.ts';
import { readJson } from '../../lib/http/validate.ts';
import { installerPlatform } from '../../lib/talos/installer.ts';
import { talosVersionSchema } from '../../lib/talos/validate.ts';
import type { AppEnv } from '../context.ts';
import { loadCluster } from '../inventory/load.ts';
import { machinesWithoutAddress } from '../machine-config/access.ts';
import { clusterTalosInput, readClusterSettings } from '../machine-config/settings.ts';
import { accepted, enqueueClusterRun } from '../runs/enqueue.ts';
import { upgradeJob, type UpgradeParams } from './job.ts';
import { defaultUpgradeImage, downgradeRefusal, installerRefusal, kubernetesRefusal } from './plan.ts';

export const upgradeBody = z.strictObject({
  talosVersion: talosVersionSchema,
  image: clusterTalosInput.shape.installerImage,
  batchSize: z.number().int().min(1).optional(),
  stage: z.boolean().optional(),
  /** Takes a minor downgrade, an unhealthy cluster or a two-member etcd; not a version the node's installer refuses. */
  force: z.boolean().optional(),
  preserve: z.boolean().optional(),
  drain: z.boolean().optional(),
  /** Seconds, or a duration such as "90s", "5m", "500ms". */
  drainTimeout: z.union([z.number().positive().max(86_400), z.string().regex(/^\d+(\.\d+)?(ms|s|m|h)$/, 'a duration such as 90s, 5m or 500ms')]).optional(),
  /** Default true: an etcd snapshot before the first node is touched. */
  etcdSnapshot: z.boolean().optional(),
});

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `drainTimeout` in milliseconds: a number is seconds, a string carries its unit. */
export function drainTimeoutMs(v: number | string): number {
  if (typeof v === 'number') return Math.max(1, Math.round(v * 1000));
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(v)!;
  return Math.max(1, Math.round(Number(m[1]) * UNIT_MS[m[2]!]!));
}

/**
 * `POST /v1/clusters/:id/upgrade`: queues a rolling Talos upgrade (cluster-changing, one at a time).
 * Refused up front, `force` or not: a target the installer would refuse to install over some
 * machine's Talos (409 unsupported_upgrade_path), and one that would not run the cluster's
 * Kubernetes (409 kubernetes_unsupported); without `force`, a minor downgrade (409 downgrade_refused).
 */
export function upgradeRoutes() {
  const app = new Hono<AppEnv>();
  app.post('/:id/upgrade', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = await readJson(c, upgradeBody);
    const rows = await c.var.deps.db.select().from(machines).where(eq(machines.clusterId, cluster.id));
    if (rows.length === 0) throw conflict('the cluster has no machines to upgrade');
    const noAddress = await machinesWithoutAddress(c.var.deps.db, cluster.id, rows);
    if (noAddress.length) throw conflict(`machines without a Talos API address: ${noAddress.join(', ')}`, { machines: noAddress });
    const workers = rows.filter((m) => m.role === 'worker').length;
    const maxBatch = Math.max(1, workers);
    if (body.batchSize !== undefined && body.batchSize > maxBatch) {
      throw badRequest(`batchSize: must be between 1 and ${maxBatch} (the cluster's workers)`);
    }
    if (body.drainTimeout !== undefined && drainTimeoutMs(body.drainTimeout) > 86_400_000) throw badRequest('drainTimeout: at most 24h');
    // Before the downgrade check: force would get past that one only to meet this.
    const installer = installerRefusal(body.talosVersion, cluster, rows);
    if (installer) throw new ApiError(409, 'unsupported_upgrade_path', installer.message, { talosVersion: body.talosVersion, machines: installer.machines });
    const downgrade = body.force ? undefined : downgradeRefusal(body.talosVersion, cluster, rows);
    if (downgrade) throw new ApiError(409, 'downgrade_refused', `${downgrade}; pass force to do it anyway`);
    // force takes a downgrade or an unhealthy cluster, not this: the nodes would not run their own configs.
    const k8s = kubernetesRefusal(body.talosVersion, cluster, rows);
    if (k8s) throw new ApiError(409, 'kubernetes_unsupported', `${k8s}; upgrade Kubernetes first, or choose a Talos that runs it`, { talosVersion: body.talosVersion, kubernetesVersion: cluster.kubernetesVersion });
    const settings = readClusterSettings(cluster.settings);
    const params: UpgradeParams = {
      talosVersion: body.talosVersion,
      image: body.image ?? defaultUpgradeImage(settings, body.talosVersion),
      // Each machine stays on its own platform's installer unless the caller names one image.
      ...(body.image ? {} : { images: Object.fromEntries(rows.map((m) => [m.id, defaultUpgradeImage(settings, body.talosVersion, installerPlatform(m.provider))])) }),
      batchSize: body.batchSize ?? 1,
      stage: body.stage ?? false,
      force: body.force ?? false,
      preserve: body.preserve ?? false,
      drain: body.drain ?? true,
      ...(body.drainTimeout !== undefined ? { drainTimeoutMs: drainTimeoutMs(body.drainTimeout) } : {}),
      ...(body.etcdSnapshot === false ? { etcdSnapshot: false } : {}),
    };
    const run = await enqueueClusterRun(c.var.deps, cluster, upgradeJob, params, c.var.principal.tokenId);
    return accepted(c, run);
  });
  return app;
}
