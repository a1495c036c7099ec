import { count, eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { clusters, machines, tenants } from '../../db/schema/index.ts';
import { canSeeTenant, requireScope } from '../auth.ts';
import { ApiError, conflict, notFound } from '../../lib/http/errors.ts';
import { errorMessage } from '../../lib/errors.ts';
import { parsePatch, type PatchInput } from '../../lib/talos/patch.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { readJson } from '../../lib/http/validate.ts';
import { newId } from '../../lib/ids.ts';
import { recordAudit } from '../audit/record.ts';
import type { AppEnv } from '../context.ts';
import { clusterSettingsInput, clusterUpdateInput, validateClusterInput } from './cluster-settings.ts';
import { openClusterSecrets, sealClusterSecrets } from '../machine-config/secrets.ts';
import { readClusterSettings } from '../machine-config/settings.ts';
import { renderOrReject } from '../machine-config/render.ts';
import { clusterMeshDeliveries } from '../../lib/mesh/dial.ts';
import { hasLiveState } from '../state/store.ts';
import { loadCluster, type ClusterRow } from './load.ts';
import { dnsLabel, idParam } from './schemas.ts';
import { refuseOutsideNetworks } from './address.ts';
import { parseEndpoint } from '../../lib/talos/validate.ts';

export const createCluster = z.strictObject({
  tenant: idParam,
  name: dnsLabel,
  ...clusterSettingsInput.shape,
});

export const publicCluster = (row: ClusterRow) => ({
  id: row.id,
  tenant: row.tenantId,
  name: row.name,
  talosVersion: row.talosVersion,
  kubernetesVersion: row.kubernetesVersion,
  endpoint: row.endpoint,
  settings: row.settings,
  bootstrapped: row.bootstrappedAt !== null,
  bootstrappedAt: row.bootstrappedAt,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt,
});

export function clusterRoutes() {
  const app = new Hono<AppEnv>();

  app.post('/', requireScope('write'), async (c) => {
    const body = await readJson(c, createCluster);
    const { db, clock, sealer } = c.var.deps;
    const tenant = await db.select().from(tenants).where(eq(tenants.id, body.tenant)).get();
    if (!tenant || !canSeeTenant(c.var.principal, tenant.id)) throw notFound('tenant');
    const { settings, talosVersion, kubernetesVersion, endpoint } = validateClusterInput(body);
    refuseOutsideNetworks(c.var.deps.settings.nodeNetworks, parseEndpoint(endpoint)!.host, 'endpoint');
    const taken = await db.query.clusters.findFirst({
      where: (t, { and, eq }) => and(eq(t.tenantId, tenant.id), eq(t.name, body.name)),
    });
    if (taken) throw conflict(`tenant already has a cluster named "${body.name}"`);
    // Patches parse (and are not absurdly nested) before any RSA key is generated for them.
    const patches = (settings as { patches?: PatchInput[] }).patches ?? [];
    patches.forEach((p, i) => {
      try {
        parsePatch(p, `patches[${i}]`);
      } catch (err) {
        throw new ApiError(400, 'invalid_config', errorMessage(err));
      }
    });
    const id = newId('cl');
    const now = clock.now();
    const secrets = await c.var.deps.newClusterSecrets();
    // Cluster patches must leave both roles' configs valid; render each once to find out.
    for (const role of ['controlplane', 'worker'] as const) {
      renderOrReject(
        { name: body.name, endpoint, talosVersion, kubernetesVersion, settings },
        { name: `check-${role}`, role, installDisk: null, patches: [], address: null },
        secrets,
      );
    }
    const [row] = await db
      .insert(clusters)
      .values({
        id,
        tenantId: tenant.id,
        name: body.name,
        talosVersion,
        kubernetesVersion,
        endpoint,
        settings,
        secretsSealed: sealClusterSecrets({ sealer }, id, secrets),
        createdAt: now,
        updatedAt: now,
      })
      .returning()
      .catch((err: unknown) => {
        // Two creates of one name at once: the unique index picks the winner.
        if (isUniqueViolation(err)) throw conflict(`tenant already has a cluster named "${body.name}"`);
        throw err;
      });
    await recordAudit(c, { action: 'cluster.create', target: id, tenantId: tenant.id });
    return c.json(publicCluster(row!), 201);
  });

  app.get('/', requireScope('read'), async (c) => {
    const p = c.var.principal;
    const tenantFilter = c.req.query('tenant');
    const rows = await c.var.deps.db.query.clusters.findMany({
      where: (t, { and, eq }) =>
        and(p.admin ? undefined : eq(t.tenantId, p.tenantId!), tenantFilter ? eq(t.tenantId, tenantFilter) : undefined),
      orderBy: (t, { asc }) => [asc(t.name)],
    });
    return c.json({ clusters: rows.map(publicCluster) });
  });

  app.get('/:id', requireScope('read'), async (c) => c.json(publicCluster(await loadCluster(c, c.req.param('id')))));

  // Talos version changes go through an upgrade run, not an edit; so do Kubernetes version changes
  // once the cluster runs (an edit would reach nodes in whatever order later pushes happen).
  app.patch('/:id', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = await readJson(c, clusterUpdateInput);
    if (cluster.bootstrappedAt !== null && body.kubernetesVersion !== undefined && body.kubernetesVersion !== cluster.kubernetesVersion) {
      throw new ApiError(409, 'use_upgrade_kubernetes', `the cluster runs Kubernetes ${cluster.kubernetesVersion}; change it with POST /v1/clusters/${cluster.id}/upgrade-kubernetes`, {
        kubernetesVersion: cluster.kubernetesVersion,
      });
    }
    const { db, clock } = c.var.deps;
    const active = await c.var.deps.jobs.activeForCluster(cluster.id);
    if (active) throw conflict('cluster has an active run', { activeRun: active.id });
    const current = readClusterSettings(cluster.settings);
    const merged = validateClusterInput({
      talosVersion: cluster.talosVersion,
      kubernetesVersion: body.kubernetesVersion ?? cluster.kubernetesVersion,
      endpoint: body.endpoint ?? cluster.endpoint,
      schematic: body.schematic ?? current.schematic,
      installerImage: body.installerImage === null ? undefined : (body.installerImage ?? current.installerImage),
      installDisk: body.installDisk ?? current.installDisk,
      podSubnets: body.podSubnets ?? current.podSubnets,
      serviceSubnets: body.serviceSubnets ?? current.serviceSubnets,
      patches: body.patches ?? current.patches,
      providerSettings: body.providerSettings ?? (cluster.settings.providerSettings as never),
    }, cluster);
    if (body.endpoint !== undefined) refuseOutsideNetworks(c.var.deps.settings.nodeNetworks, parseEndpoint(merged.endpoint)!.host, 'endpoint');
    const next = { ...cluster, ...merged };
    const secrets = openClusterSecrets(c.var.deps, cluster);
    const rows = await db.select().from(machines).where(eq(machines.clusterId, cluster.id));
    // Every machine's config must still render, or nothing changes.
    for (const role of ['controlplane', 'worker'] as const) {
      renderOrReject(next, { name: `check-${role}`, role, installDisk: null, patches: [], address: null }, secrets);
    }
    const mesh = await clusterMeshDeliveries(c.var.deps, cluster.id);
    for (const m of rows) renderOrReject(next, m, secrets, `machines.${m.name}`, mesh.get(m.id)?.documents);
    const [row] = await db
      .update(clusters)
      .set({ kubernetesVersion: merged.kubernetesVersion, endpoint: merged.endpoint, settings: merged.settings, updatedAt: clock.now() })
      .where(eq(clusters.id, cluster.id))
      .returning();
    await recordAudit(c, { action: 'cluster.update', target: cluster.id, tenantId: cluster.tenantId, detail: { fields: Object.keys(body) } });
    return c.json(publicCluster(row!));
  });

  app.delete('/:id', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const { db, jobs } = c.var.deps;
    const [{ n } = { n: 0 }] = await db.select({ n: count() }).from(machines).where(eq(machines.clusterId, cluster.id));
    if (n > 0) throw conflict(`cluster still has ${n} machine${n === 1 ? '' : 's'}; delete them first`);
    const active = await jobs.activeForCluster(cluster.id);
    if (active) throw conflict('cluster has an active run', { activeRun: active.id });
    // Deleting the row would cascade to the tofu state, orphaning whatever cloud resources it tracks.
    if (await hasLiveState(c.var.deps, cluster.id)) throw conflict('cluster still has tofu state; destroy its resources first');
    await db.delete(clusters).where(eq(clusters.id, cluster.id));
    await recordAudit(c, { action: 'cluster.delete', target: cluster.id, tenantId: cluster.tenantId });
    return c.body(null, 204);
  });

  return app;
}
