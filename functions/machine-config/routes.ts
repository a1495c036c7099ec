import { eq } from 'drizzle-orm';
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { machines } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { renderKubeconfig, renderTalosconfig } from '../../lib/talos/clientconfig.ts';
import { recordAudit } from '../audit/record.ts';
import type { AppEnv } from '../context.ts';
import { addressHost } from '../inventory/address.ts';
import { loadCluster, loadMachine, type ClusterRow } from '../inventory/load.ts';
import { renderOrReject } from './render.ts';
import { meshDocuments } from '../../lib/mesh/dial.ts';
import { openClusterSecrets } from './secrets.ts';

const YAML = { 'content-type': 'application/yaml; charset=utf-8', 'cache-control': 'no-store' };

/**
 * Files that carry cluster secrets: admin credentials and rendered machine configs. Each needs the
 * `secrets:read` scope and leaves an audit entry.
 */
export function machineConfigRoutes() {
  const app = new Hono<AppEnv>();
  // Per route, not app.use: this app is mounted beside the other /clusters routes.
  const scope = requireScope('secrets:read');
  // Hono answers HEAD with the GET handler; here that would mint a certificate and write an
  // audit entry for a request that never sees the answer.
  const secretsRead: MiddlewareHandler<AppEnv> = async (c, next) => {
    if (c.req.method === 'HEAD') return c.json({ error: { code: 'method_not_allowed', message: 'use GET' } }, 405, { allow: 'GET' });
    return scope(c, next);
  };

  const audited = async (c: Context<AppEnv>, cluster: ClusterRow, action: string, target: string) =>
    recordAudit(c, { action, target, tenantId: cluster.tenantId });

  app.get('/:id/talosconfig', secretsRead, async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const rows = await c.var.deps.db.select().from(machines).where(eq(machines.clusterId, cluster.id));
    const endpointsOf = (list: typeof rows) => list.filter((m) => m.address).map((m) => m.address!);
    const controlPlanes = endpointsOf(rows.filter((m) => m.role === 'controlplane'));
    const endpoints = controlPlanes.length ? controlPlanes : [new URL(cluster.endpoint).hostname.replace(/^\[|\]$/g, '')];
    const text = await renderTalosconfig({
      clusterName: cluster.name,
      endpoints,
      // apid refuses to proxy to a target with a port ("invalid target"): nodes are bare hosts,
      // while endpoints keep theirs (talosctl dials them).
      nodes: endpointsOf(rows).map(addressHost),
      secrets: openClusterSecrets(c.var.deps, cluster),
    });
    await audited(c, cluster, 'secrets.talosconfig', cluster.id);
    return c.body(text, 200, { ...YAML, 'content-disposition': `attachment; filename="${cluster.name}-talosconfig"` });
  });

  app.get('/:id/kubeconfig', secretsRead, async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const text = await renderKubeconfig({ clusterName: cluster.name, endpoint: cluster.endpoint, secrets: openClusterSecrets(c.var.deps, cluster) });
    await audited(c, cluster, 'secrets.kubeconfig', cluster.id);
    return c.body(text, 200, { ...YAML, 'content-disposition': `attachment; filename="${cluster.name}-kubeconfig"` });
  });

  app.get('/:id/machines/:mid/config', secretsRead, async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const machine = await loadMachine(c, cluster, c.req.param('mid'));
    const text = renderOrReject(cluster, machine, openClusterSecrets(c.var.deps, cluster), 'patches', await meshDocuments(c.var.deps, machine.id));
    await audited(c, cluster, 'secrets.machine-config', machine.id);
    return c.body(text, 200, YAML);
  });

  return app;
}
