import { Hono } from 'hono';
import { requireAdmin, requireScope } from '../auth.ts';
import { notFound } from '../../lib/http/errors.ts';
import { recordAudit } from '../audit/record.ts';
import type { AppEnv } from '../context.ts';
import { loadCluster } from '../inventory/load.ts';
import { forceReleaseLock } from './locks.ts';
import { listVersions, lockHolder } from './store.ts';

function describeLock(row: { lockId: string; info: string; heldBy: string | null; createdAt: number }) {
  let info: Record<string, unknown> = {};
  try {
    info = JSON.parse(row.info) as Record<string, unknown>;
  } catch {
    /* kept verbatim from tofu; an unreadable one still shows its id */
  }
  return { id: row.lockId, who: info.Who ?? null, operation: info.Operation ?? null, heldBy: row.heldBy, lockedAt: row.createdAt };
}

/** What people (not tofu) see of a cluster's state: its history and its lock, never a body. */
export function clusterStateRoutes() {
  const app = new Hono<AppEnv>();

  app.get('/:id/state/versions', requireScope('read'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const rows = await listVersions(c.var.deps, cluster.id);
    return c.json({ versions: rows.map((r) => ({ ...r, deleted: r.deletedAt !== null })) });
  });

  app.get('/:id/state-lock', requireScope('read'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const row = await lockHolder(c.var.deps, cluster.id);
    return c.json({ lock: row ? describeLock(row) : null });
  });

  app.delete('/:id/state-lock', requireAdmin, async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const row = await forceReleaseLock(c.var.deps, cluster.id);
    if (!row) throw notFound('state lock');
    const released = describeLock(row);
    await recordAudit(c, { action: 'state.force_unlock', target: cluster.id, tenantId: cluster.tenantId, detail: { lockId: released.id, heldBy: released.heldBy } });
    return c.json({ released });
  });

  return app;
}
