// The hub's STUN check (REZUS_MESH_STUN_SERVERS): learns the public address and the NAT's mapping
// behaviour, records them, and moves every cluster whose endpoint source is `stun` to the new
// endpoint, queueing the re-push of nodes that hold the old one.
import { eq } from 'drizzle-orm';
import { clusters, meshClusters } from '../../../db/schema/index.ts';
import type { Deps } from '../../../functions/context.ts';
import { errorMessage } from '../../../lib/errors.ts';
import { joinHostPort, loadHub, setClusterMesh, type Hub } from '../../../lib/mesh/store.ts';
import { localOnly } from '../../../lib/mesh/prefixes.ts';
import { recordStun, type StunRow } from '../../../lib/mesh/stun-state.ts';
import { detectNat, type NatReport, type StunServer } from '../../../lib/mesh/stun.ts';
import type { CronJob } from '../../cron.ts';

export const DEFAULT_STUN_CRON = '* * * * *';

export interface StunCheck {
  mapping: NatReport['mapping'];
  endpoint: string | null;
  previous: string | null;
  /** clusters moved to the new endpoint, with the re-push queued for each (or why not) */
  moved: { clusterId: string; from: string | null; to: string; run: string | null; note?: string }[];
}

/**
 * The endpoint nodes should dial, or null when STUN gives nothing usable. STUN sees the mapping of
 * its own probe socket, not of WireGuard's port, so the port is the hub's listen port: right when
 * the hub has the public address itself, or when the router forwards that port (the add-on maps
 * 51820/udp). A symmetric NAT maps every destination differently; only the relay works there. A
 * private or loopback mapping means the STUN servers sit on the hub's own network: nodes elsewhere
 * could not dial it, so it is not taken either (see stunAdvice).
 */
export function usableEndpoint(report: NatReport, listenPort: number): string | null {
  if (report.mapping !== 'none' && report.mapping !== 'endpoint-independent') return null;
  if (!report.endpoint || localOnly(report.endpoint.address)) return null;
  return joinHostPort(report.endpoint.address, listenPort);
}

export async function checkStun(deps: Deps, servers: StunServer[], opts: { bindAddress?: string; timeoutMs?: number } = {}): Promise<StunCheck | null> {
  const hub = await loadHub(deps.db);
  if (!hub) return null; // no mesh yet: nothing to tell anyone
  return applyReport(deps, hub, await detectNat(servers, { ...opts, timeoutMs: opts.timeoutMs ?? 2_000 }));
}

/** Records what a check found and moves the `stun` clusters to its endpoint, if it has a usable one. */
export async function applyStunReport(deps: Deps, report: NatReport): Promise<StunCheck | null> {
  const hub = await loadHub(deps.db);
  return hub ? applyReport(deps, hub, report) : null;
}

async function applyReport(deps: Deps, hub: Hub, report: NatReport): Promise<StunCheck> {
  const endpoint = usableEndpoint(report, hub.row.listenPort);
  const observed: StunRow['observed'] = report.observed.map((o) => ({
    server: o.server,
    mapped: o.mapped ? joinHostPort(o.mapped.address, o.mapped.port) : null,
    ...(o.error ? { error: o.error } : {}),
  }));
  const before = await recordStun(deps.db, { mapping: report.mapping, publicAddress: report.endpoint?.address ?? null, endpoint, observed, at: deps.clock.now() });
  const check: StunCheck = { mapping: report.mapping, endpoint, previous: before?.endpoint ?? null, moved: [] };
  if (before?.mapping !== report.mapping || before?.endpoint !== endpoint) {
    deps.log.info('mesh STUN', { mapping: report.mapping, endpoint, previous: check.previous });
  }
  // Nothing usable (symmetric NAT, servers silent): clusters keep what they dial.
  if (!endpoint) return check;

  const stunClusters = await deps.db
    .select({ mesh: meshClusters, tenantId: clusters.tenantId })
    .from(meshClusters)
    .innerJoin(clusters, eq(clusters.id, meshClusters.clusterId))
    .where(eq(meshClusters.endpointSource, 'stun'))
    .all();
  // The re-push's job spec (and zod, its params schema) loads when a cluster moves, not at start.
  const { enqueueRepush } = await import('../../../functions/mesh/job.ts');
  for (const { mesh, tenantId } of stunClusters) {
    if (mesh.endpoint === endpoint) continue;
    await setClusterMesh(deps, mesh.clusterId, { endpoint, endpointSource: 'stun', relay: mesh.relay });
    const reason = `hub endpoint changed from ${mesh.endpoint ?? 'none'} to ${endpoint} (STUN)`;
    try {
      const queued = await enqueueRepush(deps, { id: mesh.clusterId, tenantId }, reason, 'mesh-stun');
      check.moved.push({ clusterId: mesh.clusterId, from: mesh.endpoint, to: endpoint, run: queued.run?.id ?? null, ...(queued.run ? {} : { note: queued.reason }) });
    } catch (err) {
      check.moved.push({ clusterId: mesh.clusterId, from: mesh.endpoint, to: endpoint, run: null, note: errorMessage(err) });
    }
  }
  return check;
}

/** The cron entry, only when STUN servers are configured (two are needed to tell the NAT's kind). */
export function meshStunCron(deps: Deps): CronJob[] {
  const servers = deps.settings.meshStunServers;
  if (!servers || servers.length === 0) return [];
  return [{ name: 'mesh-stun', pattern: deps.settings.meshStunCron ?? DEFAULT_STUN_CRON, setting: 'REZUS_MESH_STUN_CRON', run: () => checkStun(deps, servers) }];
}
