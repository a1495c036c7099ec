import { talosDialer } from '../../../functions/machine-config/access.ts';
import { eq } from 'drizzle-orm';
import { clusters, machines } from '../../../db/schema/index.ts';
import { abortedUnlessCanceled, RunError, type JobExecutor } from '../../../lib/jobs/executor.ts';
import type { Deps } from '../../../functions/context.ts';
import { clusterAccess, type ClusterAccess } from '../cluster-access.ts';
import { clusterProblems, readHealth, type GateMachine, type HealthRead } from './health.ts';
import { passFinalCheck, readNodeState, settleSkipped, upgradeNode, type NodeContext, type NodeResult, type NodeState } from './node.ts';
import { downgradeRefusal, installerRefusal, isMinorDowngrade, kubernetesRefusal, sameVersion, upgradeBatches } from '../../../functions/upgrade/plan.ts';
import type { UpgradeParams } from '../../../functions/upgrade/job.ts';
import { errorMessage } from '../../../lib/errors.ts';
import { upgradeTimings } from './timings.ts';
import { snapshotBeforeUpgrade } from '../etcd/snapshot.ts';
import { runChannels } from './channels.ts';


export interface UpgradeResult {
  talosVersion: string;
  upgraded: NodeResult[];
  skipped: string[];
  /** Nodes left for a later run when this one was canceled. */
  untouched: string[];
  clusterVersionUpdated: boolean;
}


const list = (names: string[]): string => names.join(', ');

/** RunError of every rejection among `settled`, messages joined; undefined when all were fulfilled. */
function settledFailure(settled: PromiseSettledResult<unknown>[]): RunError | undefined {
  const failures = settled.filter((s): s is PromiseRejectedResult => s.status === 'rejected').map((s) => s.reason as unknown);
  if (failures.length === 0) return undefined;
  return new RunError(failures.map((e) => (e instanceof Error ? e.message : String(e))).join('; '));
}

/**
 * Nodes already on the target count as done only once settled (see settleSkipped); returns their
 * names. The skip is reported after that, so a node's last event says where it ended up.
 */
async function settleAll(ctx: NodeContext, skipped: { m: GateMachine; state: NodeState }[]): Promise<string[]> {
  const settled = await Promise.allSettled(
    skipped.map(async ({ m, state }) => {
      await settleSkipped(ctx, m);
      await ctx.emit({ type: 'upgrade.node.skip', message: `${m.name}: already on ${state.tag}`, data: { node: m.name, machine: m.id, role: m.role, phase: 'skip', elapsedMs: 0 } });
    }),
  );
  const failure = settledFailure(settled);
  if (failure) {
    ctx.hard.throwIfAborted();
    throw failure;
  }
  return skipped.map((s) => s.m.name);
}

/**
 * Why the control planes may not be rebooted one after another (undefined: they may). With two
 * voting members etcd's quorum is both of them, so each reboot stops etcd and with it the
 * Kubernetes API; upstream's own upgrade refuses this too (ValidateForUpgrade in internal/pkg/etcd).
 */
function etcdQuorumRefusal(health: HealthRead): string | undefined {
  if (health.assessment.etcd?.members !== 2) return undefined;
  return 'etcd has 2 voting members, so its quorum needs both: rebooting either control plane stops etcd (and the Kubernetes API) until it is back; add a third control plane first, or pass force to accept the outage';
}

/** Name of the control plane whose etcd member leads, from the first control plane that answers. */
async function findEtcdLeader(access: ClusterAccess, cps: GateMachine[], deadlineMs: number, signal: AbortSignal): Promise<string | undefined> {
  for (const m of cps) {
    let client;
    try {
      client = await access.talosClient(m.address);
      const opts = { deadlineMs, signal };
      const [status, members] = await Promise.all([client.etcdStatus(opts), client.etcdMemberList(opts)]);
      const hostname = members.find((x) => x.id === status.leader)?.hostname;
      const match = cps.find((c) => c.name === hostname);
      if (match) return match.name;
    } catch {
      signal.throwIfAborted();
      // Try the next one; the health precheck reports an unreadable etcd anyway.
    } finally {
      client?.close();
    }
  }
  return undefined;
}

/**
 * Rolling Talos upgrade: control planes one at a time, then workers in batches. Before touching a
 * batch the whole cluster must be healthy (etcd members, services, Kubernetes nodes); after each
 * node, the node must come back on the new version and pass its gate. The first failure stops
 * the run; untouched nodes stay as they were, and a new run resumes by skipping upgraded nodes.
 */
export const upgradeExecutor: JobExecutor<Deps, UpgradeParams> = async ({ run, deps, emit, signal }, params) => {
  const timings = upgradeTimings(deps.settings);
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, run.clusterId!)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  const rows = await deps.db.select().from(machines).where(eq(machines.clusterId, cluster.id));
  if (rows.length === 0) throw new RunError('the cluster has no machines');
  // Checked again here: a Kubernetes upgrade may have run since this one was queued.
  const k8s = kubernetesRefusal(params.talosVersion, cluster, rows);
  if (k8s) throw new RunError(`refusing to upgrade: ${k8s}`);
  const downgrade = params.force ? undefined : downgradeRefusal(params.talosVersion, cluster, rows);
  if (downgrade) throw new RunError(`refusing to upgrade: ${downgrade}; pass force to do it anyway`);
  const dial = await talosDialer(deps, cluster.id);
  const noAddress = rows.filter((m) => !dial(m)).map((m) => m.name);
  if (noAddress.length) throw new RunError(`machines without a Talos API address: ${list(noAddress)}`);
  const all: GateMachine[] = rows.map((m) => ({ id: m.id, name: m.name, role: m.role, address: dial(m)! }));

  const hard = abortedUnlessCanceled(signal);
  const access = await clusterAccess(deps, { ...cluster, endpoint: dial.kubeEndpoint(cluster, rows) });
  const channels = runChannels(access);
  const clusterId = cluster.id;
  const clusterRow = cluster;
  try {
    return await upgradeCluster();
  } finally {
    channels.close();
  }

  async function upgradeCluster(): Promise<UpgradeResult> {
    const recorded = new Map(rows.map((m) => [m.id, m.talosVersion]));
    const ctx: NodeContext = {
      access,
      channels,
      params,
      timings,
      hard,
      controlPlanes: all.filter((m) => m.role === 'controlplane'),
      keptCordons: new Set(),
      emit,
      now: () => deps.clock.now(),
      recordVersion: async (id, version) => {
        if (recorded.get(id) === version) return;
        recorded.set(id, version);
        await deps.db.update(machines).set({ talosVersion: version, updatedAt: deps.clock.now() }).where(eq(machines.id, id));
      },
    };

    const cps = all.filter((m) => m.role === 'controlplane');
    const leader = cps.length > 1 ? await findEtcdLeader(access, cps, timings.callDeadlineMs, hard) : undefined;
    if (leader) {
      ctx.leader = leader;
      await emit({ type: 'upgrade.leader', message: `${leader} leads etcd: it goes last and hands over leadership before its reboot`, data: { leader } });
    }
    const batches = upgradeBatches(all, params.batchSize, leader);
    await emit({
      type: 'upgrade.plan',
      message: `upgrading ${all.length} machines to ${params.talosVersion} in ${batches.length} steps`,
      data: { talosVersion: params.talosVersion, image: params.image, batches: batches.map((b) => b.machines.map((m) => m.name)) },
    });

    const result: UpgradeResult = { talosVersion: params.talosVersion, upgraded: [], skipped: [], untouched: [], clusterVersionUpdated: false };
    // A cancel lets the node in flight finish, then stops before anything else is touched.
    const stopped = async (index: number): Promise<UpgradeResult> => {
      hard.throwIfAborted();
      result.untouched = batches.slice(index).flatMap((b) => b.machines.map((m) => m.name)).filter((n) => !result.skipped.includes(n));
      await emit({ level: 'warn', type: 'upgrade.stopped', message: `canceled; not touched: ${list(result.untouched) || 'none'}`, data: { untouched: result.untouched } });
      return result;
    };
    // Once per run, right before the first node is touched.
    let snapshotted = false;
    // Once per run, before the first control plane is touched.
    let quorumChecked = false;
    const readAll = (): Promise<HealthRead> => readHealth(access, all, { timings, signal: hard, now: deps.clock.now(), channels });
    for (const [index, batch] of batches.entries()) {
      if (signal.aborted) return stopped(index);
      // The cluster-wide precheck does not depend on these versions: both reads run at once.
      const healthRead = readAll();
      healthRead.catch(() => {});
      const states = await Promise.all(
        batch.machines.map(async (m): Promise<NodeState> => {
          try {
            const s = await readNodeState(ctx, m);
            await ctx.recordVersion(m.id, s.tag);
            return s;
          } catch (err) {
            hard.throwIfAborted();
            throw new RunError(`${m.name}: cannot read its version: ${errorMessage(err)}`);
          }
        }),
      );
      refuseInstallerPath(batch.machines, states);
      refuseDowngrades(batch.machines, states);
      const todo: { m: GateMachine; state: NodeState }[] = [];
      const skipped: { m: GateMachine; state: NodeState }[] = [];
      for (const [i, m] of batch.machines.entries()) (sameVersion(states[i]!.tag, params.talosVersion) ? skipped : todo).push({ m, state: states[i]! });
      result.skipped.push(...(await settleAll(ctx, skipped)));
      if (todo.length === 0) continue;

      const names = todo.map((t) => t.m.name);
      // A skipped node just settled may have been uncordoned since the first read.
      const health = skipped.length ? await readAll() : await healthRead;
      if (batch.role === 'controlplane' && !quorumChecked) {
        quorumChecked = true;
        const quorum = etcdQuorumRefusal(health);
        if (quorum && !params.force) throw new RunError(`refusing to upgrade: ${quorum}`, { nodes: names });
        if (quorum) await emit({ level: 'warn', type: 'upgrade.precheck', message: `force: upgrading anyway; ${quorum}`, data: { nodes: names } });
      }
      for (const m of health.assessment.machines) if (m.talosVersion) await ctx.recordVersion(m.id, m.talosVersion);
      const problems = clusterProblems(health);
      if (problems.length) {
        const what = `cluster not healthy before ${list(names)}: ${problems.join('; ')}`;
        if (!params.force) throw new RunError(`refusing to upgrade: ${what}`, { nodes: names, problems });
        await emit({ level: 'warn', type: 'upgrade.precheck', message: `force: upgrading anyway; ${what}`, data: { nodes: names, problems } });
      } else {
        await emit({ type: 'upgrade.precheck', message: `cluster healthy; upgrading ${list(names)}`, data: { nodes: names, etcd: health.assessment.etcd } });
      }

      if (signal.aborted) return stopped(index);
      if (!snapshotted) {
        snapshotted = true;
        await snapshotBeforeUpgrade({ deps, runId: run.id, emit, signal: hard, access, dial }, clusterRow, params.etcdSnapshot !== false);
        if (signal.aborted) return stopped(index);
      }
      const settled = await Promise.allSettled(todo.map((t) => upgradeNode(ctx, t.m, t.state)));
      for (const s of settled) if (s.status === 'fulfilled') result.upgraded.push(s.value);
      const failure = settledFailure(settled);
      if (failure) {
        hard.throwIfAborted();
        throw failure;
      }
    }

    // Only when every node reports the new version, and the cluster passes a last health check, does the cluster record it.
    const now = await deps.db.select({ v: machines.talosVersion }).from(machines).where(eq(machines.clusterId, clusterId));
    if (now.length > 0 && now.every((r) => r.v !== null && sameVersion(r.v, params.talosVersion))) {
      await passFinalCheck(ctx, all);
      await emit({ type: 'upgrade.check', message: `every node on ${params.talosVersion} and the cluster healthy: recording the version`, data: { talosVersion: params.talosVersion } });
      await deps.db.update(clusters).set({ talosVersion: params.talosVersion, updatedAt: deps.clock.now() }).where(eq(clusters.id, clusterId));
      result.clusterVersionUpdated = true;
    }
    if (signal.aborted) return stopped(batches.length);
    await emit({
      type: 'upgrade.done',
      message: `${result.upgraded.length} upgraded, ${result.skipped.length} already on ${params.talosVersion}`,
      data: { upgraded: result.upgraded.map((u) => u.name), skipped: result.skipped },
    });
    return result;
  }

  /**
   * What the nodes run, not what the inventory says (the route checked that): a node moved by hand
   * would otherwise be drained, only for its installer to refuse the target, and on the legacy API
   * be left drained with its services stopped and no reboot.
   */
  function refuseInstallerPath(ms: GateMachine[], states: NodeState[]): void {
    const refused = installerRefusal(params.talosVersion, clusterRow, ms.map((m, i) => ({ name: m.name, talosVersion: states[i]!.tag })));
    if (refused) throw new RunError(`refusing to upgrade: ${refused.message}`, { nodes: refused.machines.map((m) => m.name) });
  }

  /** The live check behind the route's: a machine's recorded version may be stale or missing. */
  function refuseDowngrades(ms: GateMachine[], states: NodeState[]): void {
    if (params.force) return;
    const behind = ms.flatMap((m, i) => (isMinorDowngrade(states[i]!.tag, params.talosVersion) ? [`${m.name} runs ${states[i]!.tag}`] : []));
    if (behind.length) throw new RunError(`refusing to upgrade: ${params.talosVersion} is a minor-version downgrade for ${list(behind)}; pass force to do it anyway`);
  }
};
