import { talosDialer, type TalosDialer } from '../../../functions/machine-config/access.ts';
import { createHash } from 'node:crypto';
import { and, eq, inArray } from 'drizzle-orm';
import { clusters, machines } from '../../../db/schema/index.ts';
import { DomainError } from '../../../lib/errors.ts';
import { RunError, type JobExecutor, type RunContext } from '../../../lib/jobs/executor.ts';
import type { PushConfigParams } from '../../../functions/push-config/job.ts';
import type { RunEventInput } from '../../../lib/jobs/types.ts';
import type { DbStatement as Statement } from '../../../db/client.ts';
import { createCommitBatcher, type CommitBatcher, type RowWrite } from '../../commit-batcher.ts';
import {
  createTalosClient, isTalosApiError, isUnimplemented, type ApplyConfigurationResult, type ApplyMode, type TalosApiClient, type VersionResult,
} from '../../../lib/talos/api/index.ts';
import type { Deps } from '../../../functions/context.ts';
import type { ClusterRow, MachineRow } from '../../../functions/inventory/load.ts';
import { clusterAccess, type ClusterAccess } from '../cluster-access.ts';
import { clusterMeshDeliveries, meshDelivery, type MeshDelivery } from '../../../lib/mesh/dial.ts';
import { deliveredUpdateAll } from '../../../lib/mesh/store.ts';
import type { ConfigDocument } from '../../../lib/talos/patch.ts';
import { renderOrReject } from '../../../functions/machine-config/render.ts';
import { talosFailure, type Channel } from './failures.ts';
import { APPLIED, CONFIGURED, mayBeInMaintenance } from '../../../functions/push-config/machine-state.ts';
import { waitForMtls } from './node-wait.ts';
import { pushTimings } from './timings.ts';


export interface PushConfigResult {
  machine: string;
  node: string;
  channel: Channel;
  mode: ApplyMode;
  dryRun: boolean;
  state: string;
  talosVersion: string | null;
}

type Ctx = RunContext<Deps>;

/** Failures of an apply call that do not tell whether the node acted on it. */
const AMBIGUOUS: ReadonlySet<string> = new Set(['connection-lost', 'deadline']);

async function loadTargets(deps: Deps, clusterId: string, machineId: string): Promise<{ cluster: ClusterRow; machine: MachineRow }> {
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, clusterId)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  const machine = await deps.db
    .select()
    .from(machines)
    .where(and(eq(machines.id, machineId), eq(machines.clusterId, cluster.id)))
    .get();
  if (!machine) throw new RunError('machine no longer exists');
  return { cluster, machine };
}

function render(cluster: ClusterRow, machine: MachineRow, access: ClusterAccess, extraDocuments: ConfigDocument[]): Buffer {
  try {
    return Buffer.from(renderOrReject(cluster, machine, access.secrets, 'patches', extraDocuments));
  } catch (err) {
    if (err instanceof DomainError) throw new RunError(`config for ${machine.name}: ${err.message}`);
    throw err;
  }
}

/** A node's new state; the nodes of a cluster push reaching the same state in one turn share one UPDATE. */
function machineUpdate(deps: Deps, id: string, values: { state: string; talosVersion?: string }): RowWrite {
  return {
    table: 'machines',
    key: JSON.stringify([values.state, values.talosVersion ?? null]),
    id,
    build: (ids) => deps.db.update(machines).set({ ...values, updatedAt: deps.clock.now() }).where(inArray(machines.id, ids)),
  };
}

/** markDelivered as a row write: the nodes given the same endpoint in one turn share one UPDATE. */
function deliveredWrite(deps: Deps, id: string, endpoint: string | null): RowWrite {
  return { table: 'mesh_peers', key: JSON.stringify(endpoint), id, build: (ids) => deliveredUpdateAll(deps.db, ids, endpoint) };
}

/**
 * Runs one Talos step; a failure is logged as its own event (with node and code) before the
 * run fails with it. A canceled run is not a failure of the node, so it is passed through.
 */
async function step<T>(ctx: Ctx, name: string, channel: Channel, deadlineMs: number, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    const failure = talosFailure(name, err, channel, deadlineMs);
    if (failure instanceof RunError) {
      await ctx.emit({ level: 'error', type: 'push.error', message: failure.message, data: failure.data });
    }
    throw failure;
  }
}

/**
 * Pushes a metal machine's rendered config to its Talos API. A machine that never got a config
 * is pushed in maintenance mode (TLS without client certificate, pinned if a fingerprint was
 * given), then awaited until it answers over mTLS. Any machine that may hold a config is only
 * ever pushed over mTLS with the cluster's admin certificate.
 */
export const pushConfigExecutor: JobExecutor<Deps, PushConfigParams> = (ctx, p) => pushMachine(ctx, p);

/** One machine's push; a cluster push passes the cluster's access so credentials are minted once for all. */
/**
 * What a cluster push reads once for all its machines: the rows (as the run found them), the
 * cluster's credentials, dial addresses and mesh documents. A single push reads them itself.
 */
export interface ClusterPushShared {
  cluster: ClusterRow;
  machines: ReadonlyMap<string, MachineRow>;
  access: ClusterAccess;
  dial: TalosDialer;
  mesh: ReadonlyMap<string, MeshDelivery>;
  /** The nodes' state writes, committed together when they fall in the same turn. */
  writes: CommitBatcher;
}

export async function loadClusterPushShared(deps: Deps, cluster: ClusterRow, rows: ReadonlyMap<string, MachineRow>): Promise<ClusterPushShared> {
  const [access, dial, mesh] = await Promise.all([clusterAccess(deps, cluster), talosDialer(deps, cluster.id), clusterMeshDeliveries(deps, cluster.id)]);
  return { cluster, machines: rows, access, dial, mesh, writes: createCommitBatcher(deps.db) };
}

const NO_MESH: MeshDelivery = { documents: [], endpoint: null };

export async function pushMachine(ctx: Ctx, p: PushConfigParams, shared?: ClusterPushShared): Promise<PushConfigResult> {
  const { run, deps, emit, signal } = ctx;
  // Progress nobody waits on goes out with the next event that is awaited (or within the
  // writer's window): each awaited event costs the push a turn of the event loop, and in a
  // cluster push a turn is long. What must be on record before the node is touched is awaited.
  const progress = (e: RunEventInput): void => void emit(e, { defer: true }).catch(() => undefined);
  // A cluster push's nodes share commits; a single push's writes go straight out, in one commit each.
  const write = (rows: [RowWrite, ...RowWrite[]]): Promise<unknown> =>
    shared
      ? Promise.all(rows.map((r) => shared.writes.writeRow(r)))
      : deps.db.batch(rows.map((r) => r.build([r.id])) as [Statement, ...Statement[]]);
  const t = pushTimings(deps);
  const known = shared?.machines.get(p.machine);
  const { cluster, machine } = shared && known ? { cluster: shared.cluster, machine: known } : await loadTargets(deps, run.clusterId!, p.machine);
  // Re-checked here: the machine may have changed between enqueue and run.
  if (machine.provider !== 'metal') throw new RunError(`${machine.name} is a ${machine.provider} machine; only metal machines are pushed`);
  const dial = shared?.dial ?? (await talosDialer(deps, cluster.id));
  const address = dial(machine);
  if (!address) throw new RunError(`${machine.name} has no address to reach its Talos API`);
  const channel: Channel = mayBeInMaintenance(machine) ? 'maintenance' : 'mtls';
  if (channel === 'mtls' && p.insecure) throw new RunError(`${machine.name} is ${machine.state}; it is only pushed over mTLS, never insecure`);
  if (channel === 'maintenance' && !p.insecure) throw new RunError(`${machine.name} has no config yet; pushing in maintenance mode needs insecure: true`);

  const access = shared?.access ?? (await clusterAccess(deps, cluster));
  const mesh = shared ? (shared.mesh.get(machine.id) ?? NO_MESH) : await meshDelivery(deps, machine.id);
  const data = render(cluster, machine, access, mesh.documents);
  progress({
    type: 'push.render',
    message: `rendered the config for ${machine.name} (${data.length} bytes)`,
    data: { machine: machine.id, bytes: data.length, sha256: createHash('sha256').update(data).digest('hex') },
  });

  const call = { deadlineMs: t.callDeadlineMs, signal };
  const client: TalosApiClient =
    channel === 'maintenance'
      ? createTalosClient({ mode: 'maintenance', address, ...(p.certFingerprint ? { fingerprint: p.certFingerprint } : {}), ...(access.dialGuard ? { guard: access.dialGuard } : {}) })
      : await access.talosClient(address);
  let applied: ApplyConfigurationResult;
  let confirmed = true;
  let bootTime: number | undefined;
  try {
    if (channel === 'maintenance') {
      progress({
        level: p.certFingerprint ? 'info' : 'warn',
        type: 'push.connect',
        message: `connecting to ${client.node} in maintenance mode: TLS without client certificate, ${p.certFingerprint ? 'certificate pinned to the given fingerprint' : 'certificate NOT pinned (no certFingerprint)'}`,
        data: { node: client.node, channel, pinned: !!p.certFingerprint },
      });
    } else {
      progress({ type: 'push.connect', message: `connecting to ${client.node} over mTLS with the cluster's admin certificate`, data: { node: client.node, channel } });
    }
    // Proves the channel (pin, CA) before any config leaves this process. A configured node's boot
    // time tells its next boot apart, should the config need a reboot.
    const before = await step(ctx, 'preflight', channel, t.callDeadlineMs, async (): Promise<VersionResult | null> => {
      try {
        if (channel === 'mtls') {
          const [version, stat] = await Promise.all([client.version(call), client.systemStat(call)]);
          bootTime = stat.bootTime;
          return version;
        }
        return await client.version(call);
      } catch (err) {
        // v1.12 maintenance mode only serves ApplyConfiguration; the TLS checks still passed.
        if (channel === 'maintenance' && isUnimplemented(err)) return null;
        throw err;
      }
    });
    progress({
      type: 'push.preflight',
      message: before ? `node answered: Talos ${before.tag}${channel === 'maintenance' ? ' in maintenance mode' : ''}` : 'node is in maintenance mode (Talos v1.12 or older: no Version there)',
      data: { node: client.node, talosVersion: before?.tag ?? null },
    });
    await emit({ type: 'push.apply', message: `sending the config (mode ${p.mode}${p.dryRun ? ', dry run' : ''})`, data: { mode: p.mode, dryRun: p.dryRun } });
    applied = await step(ctx, 'apply', channel, t.callDeadlineMs, async () => {
      try {
        return await client.applyConfiguration({ data, mode: p.mode, dryRun: p.dryRun }, call);
      } catch (err) {
        // A node in maintenance reboots right after it takes a config; if the reply was lost on the
        // way, only the node coming up under our CA can tell whether it took it.
        if (channel !== 'maintenance' || p.dryRun || !isTalosApiError(err) || !AMBIGUOUS.has(err.code) || signal.aborted) throw err;
        await emit({ level: 'warn', type: 'push.unconfirmed', message: `${err.message}; the node may have taken the config, so it is checked over mTLS`, data: { node: err.node, code: err.code } });
        confirmed = false;
        return { mode: p.mode, modeDetails: '', warnings: [] };
      }
    });
  } finally {
    client.close();
  }

  const base = { machine: machine.id, node: client.node, channel, mode: applied.mode, dryRun: p.dryRun };
  if (p.dryRun) {
    // The node's dry-run summary is a config diff and may quote secrets, so it stays out of the log.
    await emit({ type: 'push.dry-run', message: `dry run: the node accepted the config (it would use mode ${applied.mode}); nothing was applied`, data: { mode: applied.mode, warnings: applied.warnings.length } });
    return { ...base, state: machine.state, talosVersion: machine.talosVersion } satisfies PushConfigResult;
  }
  if (confirmed) progress({
    type: 'push.applied',
    message: `the node accepted the config (mode ${applied.mode})${applied.warnings.length ? ` with ${applied.warnings.length} warning(s)` : ''}`,
    data: { mode: applied.mode, warnings: applied.warnings.length },
  });
  if (confirmed) {
    // Which hub endpoint the node now dials (null: none); from here it is reached over the mesh.
    const delivered = deliveredWrite(deps, machine.id, mesh.endpoint);
    // It holds our config now: from here on it is reached over mTLS only, even if this run fails.
    // An unconfirmed apply leaves the machine as it was until the node proves it over mTLS.
    // One commit for both: a cluster push makes these for every node at about the same time.
    if (channel === 'maintenance') await write([machineUpdate(deps, machine.id, { state: APPLIED }), delivered]);
    else await write([delivered]);
  }

  if (applied.mode === 'staged') {
    await emit({ type: 'push.staged', message: 'the config is staged; it takes effect at the next reboot' });
    return { ...base, state: channel === 'maintenance' ? APPLIED : machine.state, talosVersion: machine.talosVersion } satisfies PushConfigResult;
  }
  const rebooting = channel === 'maintenance' || applied.mode === 'reboot';
  if (channel === 'mtls' && rebooting) progress({ type: 'push.rebooting', message: 'the node reboots to apply the config' });
  progress({ type: 'push.waiting', message: `waiting up to ${Math.round(t.readyTimeoutMs / 1000)} s for ${client.node} to answer over mTLS${channel === 'mtls' && rebooting ? ' from its next boot' : ''}` });
  const after = await waitForMtls(access, address, t, signal, { rebooting, ...(channel === 'mtls' && rebooting ? { bootedAfter: bootTime } : {}) }).catch(async (err: unknown) => {
    if (err instanceof RunError && !signal.aborted) await emit({ level: 'error', type: 'push.error', message: err.message, data: { step: 'wait', ...err.data } });
    throw err;
  });
  progress({ type: 'push.ready', message: `node answers over mTLS: Talos ${after.tag}`, data: { talosVersion: after.tag } });
  await write([machineUpdate(deps, machine.id, { state: CONFIGURED, talosVersion: after.tag })]);
  progress({ type: 'push.done', message: `${machine.name} is configured (Talos ${after.tag})`, data: { state: CONFIGURED, talosVersion: after.tag } });
  return { ...base, state: CONFIGURED, talosVersion: after.tag } satisfies PushConfigResult;
}
