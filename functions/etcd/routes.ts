import { and, desc, eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { etcdSnapshots, machines } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { recordAudit } from '../audit/record.ts';
import { ApiError, notFound } from '../../lib/http/errors.ts';
import { parseWith, readJson } from '../../lib/http/validate.ts';
import type { AppEnv } from '../context.ts';
import { loadCluster, type ClusterRow } from '../inventory/load.ts';
import { dnsLabel, idParam } from '../inventory/schemas.ts';
import { talosAddressOf } from '../machine-config/access.ts';
import { dialAddress } from '../../lib/mesh/dial.ts';
import { accepted, enqueueClusterRun } from '../runs/enqueue.ts';
import { DEFAULT_SNAPSHOT_KEEP, etcdDefragJob, etcdRestoreJob, etcdSnapshotJob } from './job.ts';
import { snapshotStream, SnapshotUnreadable, verifySnapshot } from './stored.ts';

export const snapshotBody = z.strictObject({ keep: z.number().int().min(1).max(1000).optional() });
export const restoreBody = z.strictObject({ machine: z.union([idParam, dnsLabel]) });
export const defragBody = z.strictObject({});

const listed = { id: etcdSnapshots.id, createdAt: etcdSnapshots.createdAt, machine: etcdSnapshots.machineName, sizeBytes: etcdSnapshots.sizeBytes, revision: etcdSnapshots.revision, sha256: etcdSnapshots.sha256, trigger: etcdSnapshots.trigger, runId: etcdSnapshots.runId };

function requireEtcd(cluster: ClusterRow): void {
  if (cluster.bootstrappedAt === null) throw new ApiError(409, 'not_bootstrapped', 'the cluster has no etcd yet: bootstrap it first');
}

/** etcd snapshots: take one now, list them, download one (secrets:read, audited), restore one. */
export function etcdSnapshotRoutes() {
  const app = new Hono<AppEnv>();

  app.post('/:id/etcd-snapshots', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = (await c.req.text()).length ? await readJson(c, snapshotBody) : parseWith(snapshotBody, {});
    requireEtcd(cluster);
    const run = await enqueueClusterRun(c.var.deps, cluster, etcdSnapshotJob, { trigger: 'manual', keep: body.keep ?? c.var.deps.settings.etcdSnapshotKeep ?? DEFAULT_SNAPSHOT_KEEP }, c.var.principal.tokenId);
    return accepted(c, run);
  });

  app.post('/:id/etcd-defrag', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    if ((await c.req.text()).length) await readJson(c, defragBody);
    requireEtcd(cluster);
    const run = await enqueueClusterRun(c.var.deps, cluster, etcdDefragJob, {}, c.var.principal.tokenId);
    return accepted(c, run);
  });

  app.get('/:id/etcd-snapshots', requireScope('read'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const rows = await c.var.deps.db.select(listed).from(etcdSnapshots).where(eq(etcdSnapshots.clusterId, cluster.id)).orderBy(desc(etcdSnapshots.createdAt), desc(etcdSnapshots.id));
    return c.json({ snapshots: rows });
  });

  app.get('/:id/etcd-snapshots/:sid', requireScope('secrets:read'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const snap = await c.var.deps.db.select().from(etcdSnapshots).where(and(eq(etcdSnapshots.id, c.req.param('sid')), eq(etcdSnapshots.clusterId, cluster.id))).get();
    if (!snap) throw notFound('snapshot');
    // Every chunk is opened once before the answer starts, so a chunk changed in the database is
    // a clear error here instead of a download that breaks off half-way; then streamed, one chunk
    // at a time, never held whole.
    try {
      await verifySnapshot(c.var.deps, snap);
    } catch (err) {
      if (err instanceof SnapshotUnreadable) throw new ApiError(500, 'snapshot_unreadable', err.message);
      throw err;
    }
    await recordAudit(c, { action: 'secrets.etcd-snapshot', target: snap.id, tenantId: cluster.tenantId });
    return c.body(snapshotStream(c.var.deps, snap), 200, {
      'content-type': 'application/octet-stream',
      'content-length': String(snap.sizeBytes),
      'cache-control': 'no-store',
      'content-disposition': `attachment; filename="${cluster.name}-etcd-${snap.id}.db"`,
      'x-etcd-revision': snap.revision,
      'x-content-sha256': snap.sha256,
    });
  });

  app.post('/:id/etcd-snapshots/:sid/restore', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = await readJson(c, restoreBody);
    const snap = await c.var.deps.db.select({ id: etcdSnapshots.id }).from(etcdSnapshots).where(and(eq(etcdSnapshots.id, c.req.param('sid')), eq(etcdSnapshots.clusterId, cluster.id))).get();
    if (!snap) throw notFound('snapshot');
    const rows = await c.var.deps.db.select().from(machines).where(eq(machines.clusterId, cluster.id));
    const target = rows.find((m) => m.id === body.machine) ?? rows.find((m) => m.name === body.machine);
    if (!target) throw notFound('machine');
    if (target.role !== 'controlplane') throw new ApiError(400, 'not_control_plane', `${target.name} is a worker; etcd is restored on a control plane`);
    if (!(await dialAddress(c.var.deps.db, target.id, talosAddressOf(target)))) throw new ApiError(400, 'no_address', `${target.name} has no address to reach its Talos API`);
    const run = await enqueueClusterRun(c.var.deps, cluster, etcdRestoreJob, { snapshot: snap.id, machine: target.id }, c.var.principal.tokenId);
    return accepted(c, run);
  });
  return app;
}
