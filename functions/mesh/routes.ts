import { eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { machines } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { ApiError } from '../../lib/http/errors.ts';
import { readJson } from '../../lib/http/validate.ts';
import type { HubStatus } from '../../lib/mesh/hub-driver-types.ts';
import { DEFAULT_IPV4_PREFIX, InvalidPrefixError, parseEndpointLiteral, parsePrefix, unroutable, type Prefix } from '../../lib/mesh/prefixes.ts';
import { loadStun, stunAdvice } from '../../lib/mesh/stun-state.ts';
import { accepted, enqueueClusterRun } from '../runs/enqueue.ts';
import { enqueueRepush, meshRepushJob } from './job.ts';
import {
  affectedMachines, allocatePeer, ensureHub, ensureRoom, listPeers, loadClusterMesh, loadHub, MeshConflictError, MeshExhaustedError, nodeEndpoint, peerAddresses,
  setClusterMesh, disableClusterMesh,
} from '../../lib/mesh/store.ts';
import { parseIp, formatIp } from '../../lib/talos/net.ts';
import { networksCover } from '../../lib/talos/node-networks.ts';
import type { AppEnv, Deps } from '../context.ts';
import { loadCluster } from '../inventory/load.ts';

/** `stun`: the endpoint is what the runner's STUN check learns (REZUS_MESH_STUN_SERVERS), kept current by it. */
export const STUN_ENDPOINT = 'stun';

// Nodes dial the endpoint (or the relay) from their own networks, and overlay addresses travel
// between hosts: a loopback, link-local, multicast or unspecified one cuts the nodes off, and a
// changed endpoint is pushed to every node, which then needs its cold-boot path back.
const endpointField = z.string().max(64).transform((v, ctx) => {
  if (v === STUN_ENDPOINT) return v;
  try {
    const endpoint = parseEndpointLiteral(v);
    const range = unroutable(endpoint.text);
    if (range) throw new InvalidPrefixError(`${endpoint.host} is a ${range} address: nodes dial the endpoint from their own network`);
    return endpoint.text;
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});
const prefixField = (family: 4 | 6) =>
  z
    .string()
    .max(64)
    .refine((v) => {
      try {
        return parsePrefix(v).family === family;
      } catch {
        return false;
      }
    }, `must be an IPv${family} prefix with zero host bits${family === 4 ? ', e.g. 100.64.0.0/10' : ', e.g. fd7a:7265:7a75::/64'}`)
    .superRefine((v, ctx) => {
      const range = unroutable(v);
      if (range) ctx.addIssue({ code: 'custom', message: `${v} overlaps the ${range} range: overlay addresses travel between hosts` });
    });
const port = z.number().int().min(1).max(65535);


export const meshBody = z
  .strictObject({
    endpoint: endpointField.optional(),
    relay: z
      .strictObject({
        address: z
          .string()
          .refine((v) => parseIp(v) !== undefined, 'must be an IP literal')
          .superRefine((v, ctx) => {
            const range = unroutable(v);
            if (range) ctx.addIssue({ code: 'custom', message: `${v} is a ${range} address: nodes dial the relay from their own network` });
          })
          .transform((v) => formatIp(parseIp(v)!)),
        nodePortBase: port,
        hubPortBase: port,
      })
      .optional(),
    ipv4Prefix: prefixField(4).optional(),
    ipv6Prefix: prefixField(6).optional(),
  })
  .refine((b) => b.endpoint !== undefined || b.relay !== undefined, { message: 'give endpoint (ip:port or "stun") or relay', path: ['endpoint'] });

/**
 * A relay forwards one port per node on each side (base + the node's host index): both ranges must
 * fit under 65536 and not overlap, or nodes would be given ports Talos refuses or that collide.
 */
function checkRelayPorts(relay: { nodePortBase: number; hubPortBase: number }, highestIndex: number): void {
  const tops = [relay.nodePortBase, relay.hubPortBase].map((base) => base + highestIndex);
  if (tops.some((top) => top > 65535)) {
    throw new ApiError(400, 'invalid_request', `relay ports: with host indexes up to ${highestIndex}, nodePortBase and hubPortBase must each be at most ${65535 - highestIndex}`);
  }
  if (Math.abs(relay.nodePortBase - relay.hubPortBase) <= highestIndex) {
    throw new ApiError(400, 'invalid_request', `relay ports: the node-side and hub-side ranges overlap; keep nodePortBase and hubPortBase more than ${highestIndex} apart`);
  }
}

/** Whether nodes dial the same thing before and after: the endpoint, or the relay and its ports. */
const sameDial = (a: { endpoint: string | null; relay: { address: string; nodePortBase: number; hubPortBase: number } | null }, b: typeof a): boolean =>
  a.endpoint === b.endpoint && JSON.stringify(a.relay) === JSON.stringify(b.relay);

/** What a cluster's nodes dial, in words, for run events: the endpoint, or the relay. */
const dialTarget = (m: { endpoint: string | null; relay: { address: string; nodePortBase: number } | null } | null) =>
  !m ? 'none' : m.relay ? `relay ${m.relay.address} (ports from ${m.relay.nodePortBase})` : (m.endpoint ?? 'none (waiting for STUN)');

type HubStatusOf = HubStatus | { state: 'not-hosted'; missing: string[] };

async function hubStatus(deps: Deps, sync: boolean): Promise<HubStatusOf> {
  if (!deps.meshHub) return { state: 'not-hosted', missing: ['this host does not run the hub; the Node runner applies it'] };
  return sync ? deps.meshHub.sync() : deps.meshHub.status();
}

/** `status`: the hub's, or how to read it; read only for a cluster on the mesh (it runs `wg show`). */
async function view(deps: Deps, clusterId: string, status: HubStatusOf | (() => Promise<HubStatusOf>)) {
  const hub = await loadHub(deps.db);
  const cluster = await loadClusterMesh(deps.db, clusterId);
  if (!hub || !cluster) return { enabled: false, ...(typeof status === 'function' ? {} : { hub: { status } }) };
  if (typeof status === 'function') status = await status();
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
  const stun = await loadStun(deps.db);
  const pending = (await affectedMachines(deps.db, clusterId)).map((a) => ({ machine: a.machineId, name: names.get(a.machineId) ?? null, delivered: a.delivered, wanted: a.wanted }));
  return {
    enabled: true,
    endpoint: cluster.endpoint,
    endpointSource: cluster.endpointSource,
    relay: cluster.relay,
    // Nodes whose config still dials an old endpoint; a mesh-repush run moves them.
    pending,
    stun: {
      enabled: (deps.settings.meshStunServers?.length ?? 0) > 0,
      mapping: stun?.mapping ?? null,
      publicAddress: stun?.publicAddress ?? null,
      endpoint: stun?.endpoint ?? null,
      observed: stun?.observed ?? [],
      checkedAt: stun ? new Date(stun.checkedAt).toISOString() : null,
      changedAt: stun?.changedAt ? new Date(stun.changedAt).toISOString() : null,
      advice: stunAdvice(stun),
    },
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

/**
 * The runner dials a mesh cluster's nodes, and its Kubernetes API, at their IPv4 overlay
 * addresses: with REZUS_NODE_NETWORKS set, a hub prefix outside it would leave every node of the
 * cluster unreachable once its mesh config is delivered. Said before anything is written.
 */
function refuseOverlayOutside(deps: Deps, v4: Prefix): void {
  const networks = deps.settings.nodeNetworks;
  if (!networks || networksCover(networks, { family: 4, network: v4.network, prefix: v4.length, hostBitsSet: false })) return;
  throw new ApiError(409, 'mesh_outside_node_networks', `the hub's overlay prefix ${v4.text} is outside REZUS_NODE_NETWORKS=${networks.text}: the runner dials mesh nodes there; add it to the list first`, {
    ipv4Prefix: v4.text,
  });
}

/** `PUT /:id/mesh` turns the cluster's mesh on (records desired state, allocates every machine), `GET` shows it. */
export function meshRoutes() {
  const app = new Hono<AppEnv>();

  app.put('/:id/mesh', requireScope('write'), async (c) => {
    const deps = c.var.deps;
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = await readJson(c, meshBody);
    const fromStun = body.endpoint === STUN_ENDPOINT;
    if (fromStun && !deps.settings.meshStunServers?.length) {
      throw new ApiError(400, 'stun_off', 'endpoint "stun" needs STUN servers: set REZUS_MESH_STUN_SERVERS=host:port,host:port on the runner');
    }
    // The one hub serves every tenant, and its prefixes become addresses on the runner's host.
    if ((body.ipv4Prefix !== undefined || body.ipv6Prefix !== undefined) && !c.var.principal.admin) {
      throw new ApiError(403, 'forbidden', "the hub's prefixes are addresses on the runner's host, shared by every tenant: only an admin token sets them");
    }
    const before = await loadClusterMesh(deps.db, cluster.id);
    let after;
    try {
      const rows = await deps.db.select({ id: machines.id }).from(machines).where(eq(machines.clusterId, cluster.id)).orderBy(machines.name).all();
      const stored = await loadHub(deps.db);
      const prefixes = stored ?? { v4: parsePrefix(body.ipv4Prefix ?? DEFAULT_IPV4_PREFIX), ...(body.ipv6Prefix ? { v6: parsePrefix(body.ipv6Prefix) } : {}) };
      refuseOverlayOutside(deps, prefixes.v4);
      const { highestIndex } = await ensureRoom(deps.db, prefixes, rows.map((m) => m.id));
      if (body.relay) checkRelayPorts(body.relay, highestIndex);
      const hub = await ensureHub(deps, { ipv4Prefix: body.ipv4Prefix, ipv6Prefix: body.ipv6Prefix });
      const endpoint = fromStun ? ((await loadStun(deps.db))?.endpoint ?? null) : (body.endpoint ?? null);
      after = await setClusterMesh(deps, cluster.id, { endpoint, endpointSource: fromStun ? 'stun' : 'configured', relay: body.relay ?? null });
      for (const m of rows) await allocatePeer(deps, hub, cluster.id, m.id);
    } catch (err) {
      if (err instanceof MeshConflictError) throw new ApiError(409, 'mesh_conflict', err.message);
      if (err instanceof MeshExhaustedError) throw new ApiError(409, 'mesh_exhausted', err.message);
      if (err instanceof InvalidPrefixError) throw new ApiError(400, 'invalid_request', err.message);
      throw err;
    }
    // Nodes holding a config that dials the old endpoint get the new one over the mesh.
    const changed = before && !sameDial(before, after);
    const repush = changed ? await enqueueRepush(deps, cluster, `hub endpoint changed from ${dialTarget(before)} to ${dialTarget(after)}`, c.var.principal.tokenId) : null;
    return c.json({ ...(await view(deps, cluster.id, await hubStatus(deps, true))), repush: repush && (repush.run ? { run: repush.run.id, machines: repush.machines } : { run: null, reason: repush.reason }) });
  });

  /** Queues the re-push of pending nodes by hand, e.g. after a node that was offline is back. */
  app.post('/:id/mesh/repush', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const mesh = await loadClusterMesh(c.var.deps.db, cluster.id);
    if (!mesh) throw new ApiError(409, 'mesh_off', 'the mesh is off for this cluster');
    const pending = await affectedMachines(c.var.deps.db, cluster.id);
    if (pending.length === 0) throw new ApiError(409, 'nothing_pending', 'every node already holds a config with the current endpoint');
    const run = await enqueueClusterRun(c.var.deps, cluster, meshRepushJob, { reason: `re-push requested: ${pending.length} node(s) dial an old endpoint, now ${dialTarget(mesh)}` }, c.var.principal.tokenId);
    return accepted(c, run);
  });

  app.get('/:id/mesh', requireScope('read'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    return c.json(await view(c.var.deps, cluster.id, () => hubStatus(c.var.deps, false)));
  });

  app.delete('/:id/mesh', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    await disableClusterMesh(c.var.deps.db, cluster.id);
    return c.json(await view(c.var.deps, cluster.id, await hubStatus(c.var.deps, true)));
  });

  return app;
}
