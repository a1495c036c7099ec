import { and, eq } from 'drizzle-orm';
import type { Context } from 'hono';
import { clusters, machines, tenants } from '../../db/schema/index.ts';
import { canSeeTenant } from '../auth.ts';
import { notFound } from '../../lib/http/errors.ts';
import type { AppEnv } from '../context.ts';

export type ClusterRow = typeof clusters.$inferSelect;
export type MachineRow = typeof machines.$inferSelect;

/** Loads an object the caller may see; another tenant's object is reported as not found. */
export async function loadTenant(c: Context<AppEnv>, id: string) {
  const row = await c.var.deps.db.select().from(tenants).where(eq(tenants.id, id)).get();
  if (!row || !canSeeTenant(c.var.principal, row.id)) throw notFound('tenant');
  return row;
}

export async function loadCluster(c: Context<AppEnv>, id: string): Promise<ClusterRow> {
  const row = await c.var.deps.db.select().from(clusters).where(eq(clusters.id, id)).get();
  if (!row || !canSeeTenant(c.var.principal, row.tenantId)) throw notFound('cluster');
  return row;
}

export async function loadMachine(c: Context<AppEnv>, cluster: ClusterRow, mid: string): Promise<MachineRow> {
  const row = await c.var.deps.db
    .select()
    .from(machines)
    .where(and(eq(machines.id, mid), eq(machines.clusterId, cluster.id)))
    .get();
  if (!row) throw notFound('machine');
  return row;
}
