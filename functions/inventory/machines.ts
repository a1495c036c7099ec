import { and, eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { machines } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { conflict } from '../../lib/http/errors.ts';
import { readJson } from '../../lib/http/validate.ts';
import { newId } from '../../lib/ids.ts';
import { recordAudit } from '../audit/record.ts';
import type { AppEnv } from '../context.ts';
import { loadCluster, loadMachine, type MachineRow } from './load.ts';
import { dnsLabel } from './schemas.ts';
import { addressHost, isNodeAddress, refuseOutsideNetworks } from './address.ts';
import { renderOrReject } from '../machine-config/render.ts';
import { openClusterSecrets } from '../machine-config/secrets.ts';
import { patchList } from '../machine-config/settings.ts';
import { meshDocuments } from '../../lib/mesh/dial.ts';

export const PROVIDERS = ['oci', 'openstack', 'hetzner', 'aws', 'metal', 'local'] as const;

const address = z.string().max(300).refine(isNodeAddress, 'must be an IP address or hostname, optionally with :port');
const installDisk = z.string().max(255).regex(/^\/[^\0\s]*$/, 'must be an absolute path like /dev/sda');

export const createMachine = z.strictObject({
  name: dnsLabel,
  role: z.enum(['controlplane', 'worker']),
  provider: z.enum(PROVIDERS),
  address: address.optional(),
  installDisk: installDisk.optional(),
  patches: patchList.optional(),
});

export const updateMachine = z.strictObject({
  address: address.nullable().optional(),
  installDisk: installDisk.nullable().optional(),
  patches: patchList.optional(),
});

export const publicMachine = (m: MachineRow) => ({
  id: m.id,
  cluster: m.clusterId,
  name: m.name,
  role: m.role,
  provider: m.provider,
  address: m.address,
  installDisk: m.installDisk,
  patches: m.patches,
  state: m.state,
  talosVersion: m.talosVersion,
  kubernetesComponents: m.kubernetesComponents ?? null,
  ipv4: m.ipv4,
  ipv6: m.ipv6,
  createdAt: m.createdAt,
  updatedAt: m.updatedAt,
});

export function machineRoutes() {
  const app = new Hono<AppEnv>();

  app.post('/:id/machines', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = await readJson(c, createMachine);
    const { db, clock } = c.var.deps;
    if (body.address) refuseOutsideNetworks(c.var.deps.settings.nodeNetworks, addressHost(body.address), 'address');
    const taken = await db
      .select({ id: machines.id })
      .from(machines)
      .where(and(eq(machines.clusterId, cluster.id), eq(machines.name, body.name)))
      .get();
    if (taken) throw conflict(`cluster already has a machine named "${body.name}"`);
    const now = clock.now();
    renderOrReject(
      cluster,
      { ...body, address: body.address ?? null, installDisk: body.installDisk ?? null, patches: body.patches ?? [] },
      openClusterSecrets(c.var.deps, cluster),
    );
    const [row] = await db
      .insert(machines)
      .values({
        id: newId('m'),
        clusterId: cluster.id,
        name: body.name,
        role: body.role,
        provider: body.provider,
        address: body.address ?? null,
        installDisk: body.installDisk ?? null,
        patches: body.patches ?? [],
        state: 'new',
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    return c.json(publicMachine(row!), 201);
  });

  app.get('/:id/machines', requireScope('read'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const rows = await c.var.deps.db.select().from(machines).where(eq(machines.clusterId, cluster.id)).orderBy(machines.name);
    return c.json({ machines: rows.map(publicMachine) });
  });

  app.get('/:id/machines/:mid', requireScope('read'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    return c.json(publicMachine(await loadMachine(c, cluster, c.req.param('mid'))));
  });

  app.patch('/:id/machines/:mid', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const machine = await loadMachine(c, cluster, c.req.param('mid'));
    const body = await readJson(c, updateMachine);
    if (body.address) refuseOutsideNetworks(c.var.deps.settings.nodeNetworks, addressHost(body.address), 'address');
    // With its mesh document, as it is delivered: a patch may clash with it (a link of its name).
    renderOrReject(cluster, { ...machine, ...body }, openClusterSecrets(c.var.deps, cluster), 'patches', await meshDocuments(c.var.deps, machine.id));
    const [row] = await c.var.deps.db
      .update(machines)
      .set({ ...body, updatedAt: c.var.deps.clock.now() })
      .where(eq(machines.id, machine.id))
      .returning();
    return c.json(publicMachine(row!));
  });

  app.delete('/:id/machines/:mid', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const machine = await loadMachine(c, cluster, c.req.param('mid'));
    const active = await c.var.deps.jobs.activeForCluster(cluster.id);
    if (active) throw conflict('cluster has an active run', { activeRun: active.id });
    await c.var.deps.db.delete(machines).where(eq(machines.id, machine.id));
    await recordAudit(c, { action: 'machine.delete', target: machine.id, tenantId: cluster.tenantId });
    return c.body(null, 204);
  });

  return app;
}
