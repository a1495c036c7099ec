import { eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { machines } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { ApiError } from '../../lib/http/errors.ts';
import { readJson } from '../../lib/http/validate.ts';
import type { HubStatus } from '../../lib/mesh/hub-driver-types.ts';
import { InvalidPrefixError, parseEndpointLiteral, parsePrefix } from '../../lib/mesh/prefixes.ts';
import {
  allocatePeer, ensureHub, listPeers, loadClusterMesh, loadHub, MeshConflictError, MeshExhaustedError, nodeEndpoint, peerAddresses,
  setClusterMesh, disableClusterMesh,
} from '../../lib/mesh/store.ts';
import { parseIp, formatIp } from '../../lib/talos/net.ts';
import type { AppEnv, Deps } from '../context.ts';
import { loadCluster } from '../inventory/load.ts';

const endpointField = z.string().max(64).transform((v, ctx) => {
  try {
    return parseEndpointLiteral(v).text;
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});
const prefixField = (family: 4 | 6) =>
  z.string().max(64).refine((v) => {
    try {
      return parsePrefix(v).family === family;
    } catch {
      return false;
    }
  }, `must be an IPv${family} prefix with zero host bits${family === 4 ? ', e.g. 100.64.0.0/10' : ', e.g. fd7a:7265:7a75::/64'}`);
const port = z.number().int().min(1).max(65535);

export const meshBody = z
  .strictObject({
    endpoint: endpointField.optional(),
    relay: z
      .strictObject({
        address: z.string().refine((v) => parseIp(v) !== undefined, 'must be an IP literal').transform((v) => formatIp(parseIp(v)!)),
        nodePortBase: port,
        hubPortBase: port,
      })
      .optional(),
    ipv4Prefix: prefixField(4).optional(),
    ipv6Prefix: prefixField(6).optional(),
  })
  .refine((b) => b.endpoint !== undefined || b.relay !== undefined, { message: 'give endpoint (ip:port) or relay', path: ['endpoint'] });

async function hubStatus(deps: Deps, sync: boolean): Promise<HubStatus | { state: 'not-hosted'; missing: string[] }> {
  if (!deps.meshHub) return { state: 'not-hosted', missing: ['this host does not run the hub; the Node runner applies it'] };
  return sync ? deps.meshHub.sync() : deps.meshHub.status();
}

async function view(deps: Deps, clusterId: string, status: Awaited<ReturnType<typeof hubStatus>>) {
  const hub = await loadHub(deps.db);
  const cluster = await loadClusterMesh(deps.db, clusterId);
  if (!hub || !cluster) return { enabled: false, hub: { status } };
  const names = new Map((await deps.db.select({ id: machines.id, name: machines.name }).from(machines).where(eq(machines.clusterId, clusterId)).all()).map((m) => [m.id, m.name]));
  const live = new Map(('interface' in status && status.interface ? status.interface.peers : []).map((p) => [p.publicKey, p]));
  const peers = (await listPeers(deps.db, clusterId)).map((p) => {
    const s = live.get(p.publicKey);
    return {
      machine: p.machineId,
      name: names.get(p.machineId) ?? null,
      ...peerAddresses(hub, p),
      publicKey: p.publicKey,
      dials: nodeEndpoint(cluster, p),
      deliveredEndpoint: p.deliveredEndpoint,
      latestHandshake: s?.latestHandshake ? new Date(s.latestHandshake).toISOString() : null,
      endpoint: s?.endpoint ?? null,
      rxBytes: s?.rxBytes ?? 0,
      txBytes: s?.txBytes ?? 0,
    };
  });
  return {
    enabled: true,
    endpoint: cluster.endpoint,
    relay: cluster.relay,
    hub: {
      publicKey: hub.row.publicKey,
      interface: hub.row.interfaceName,
      listenPort: hub.row.listenPort,
      ...hub.addresses,
      ipv4Prefix: hub.v4.text,
      ipv6Prefix: hub.v6.text,
      status,
    },
    peers,
  };
}

/** `PUT /:id/mesh` turns the cluster's mesh on (records desired state, allocates every machine), `GET` shows it. */
export function meshRoutes() {
  const app = new Hono<AppEnv>();

  app.put('/:id/mesh', requireScope('write'), async (c) => {
    const deps = c.var.deps;
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = await readJson(c, meshBody);
    try {
      const hub = await ensureHub(deps, { ipv4Prefix: body.ipv4Prefix, ipv6Prefix: body.ipv6Prefix });
      await setClusterMesh(deps, cluster.id, { endpoint: body.endpoint ?? null, endpointSource: 'configured', relay: body.relay ?? null });
      const rows = await deps.db.select({ id: machines.id }).from(machines).where(eq(machines.clusterId, cluster.id)).orderBy(machines.name).all();
      for (const m of rows) await allocatePeer(deps, hub, cluster.id, m.id);
    } catch (err) {
      if (err instanceof MeshConflictError) throw new ApiError(409, 'mesh_conflict', err.message);
      if (err instanceof MeshExhaustedError) throw new ApiError(409, 'mesh_exhausted', err.message);
      if (err instanceof InvalidPrefixError) throw new ApiError(400, 'invalid_request', err.message);
      throw err;
    }
    return c.json(await view(deps, cluster.id, await hubStatus(deps, true)));
  });

  app.get('/:id/mesh', requireScope('read'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    return c.json(await view(c.var.deps, cluster.id, await hubStatus(c.var.deps, false)));
  });

  app.delete('/:id/mesh', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    await disableClusterMesh(c.var.deps.db, cluster.id);
    return c.json(await view(c.var.deps, cluster.id, await hubStatus(c.var.deps, true)));
  });

  return app;
}
