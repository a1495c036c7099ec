// One node's upgrade: install over the API its version calls for, reboot, wait until it has
// rebooted into the new version, then hold it to the health gate.
import { setTimeout as sleep } from 'node:timers/promises';
import { RunError } from '../../../lib/jobs/executor.ts';
import type { RunEventInput } from '../../../lib/jobs/types.ts';
import { isTalosApiError, isUnimplemented, type TalosApiClient } from '../../../lib/talos/api/index.ts';
import type { ClusterAccess } from '../cluster-access.ts';
import type { RunChannels } from './channels.ts';
import { clusterProblems, nodeGateProblems, readHealth, type GateMachine, type HealthRead } from './health.ts';
import { apiFor, sameVersion, upgradeImageOf, type UpgradeApi } from '../../../functions/upgrade/plan.ts';
import type { UpgradeParams } from '../../../functions/upgrade/job.ts';
import { errorMessage } from '../../../lib/errors.ts';
import type { UpgradeTimings } from '../../../functions/settings.ts';
import { cordonOf, drainFor, forfeitLeadership, uncordon } from './drain.ts';
import { CORDONED_REASON } from '../collect/assess.ts';
import { pauseBeforeNextRead } from '../../../lib/kube/index.ts';
import { untilPortReturns, type PortWatch } from '../node-port.ts';

export interface NodeContext {
  access: ClusterAccess;
  /** The run's kept connections for health reads and Kubernetes writes. */
  channels?: RunChannels;
  params: UpgradeParams;
  timings: UpgradeTimings;
  /** Aborted when the run must stop at once (shutdown, lease lost); a cancel lets the node finish. */
  hard: AbortSignal;
  /** Machine name of the etcd leader: it forfeits leadership right before its reboot. */
  leader?: string;
  /** Every control plane of the cluster: a control plane's gate needs their etcd view. */
  controlPlanes: GateMachine[];
  /**
   * Machine names found cordoned by someone else: the upgrade leaves them cordoned. Without
   * `force` that cordon holds the run back like any health problem; with it, the gates do not
   * count it (the run was told to go on, and lifting the cordon is not the upgrade's call).
   */
  keptCordons: Set<string>;
  emit(event: RunEventInput): Promise<void>;
  /** Wall clock for health durations ("NotReady for 5m"). */
  now(): number;
  recordVersion(machineId: string, version: string): Promise<void>;
}

/** What a node runs right now: its version tag and when it last booted (changes with every reboot). */
export interface NodeState {
  tag: string;
  bootTime: number;
}

export interface NodeResult {
  name: string;
  api: UpgradeApi;
  from: string;
  to: string;
  elapsedMs: number;
}

function message(err: unknown): string {
  return errorMessage(err);
}

type NodeEvent = (type: string, phase: string, text: string, extra?: Record<string, unknown>, level?: RunEventInput['level']) => Promise<void>;

/** One node's event writer and error maker; events carry the time since this call. */
function reporting(ctx: NodeContext, m: GateMachine): { elapsed(): number; event: NodeEvent; fail(text: string): RunError } {
  const started = performance.now();
  const elapsed = (): number => Math.round(performance.now() - started);
  const event: NodeEvent = (type, phase, text, extra = {}, level = 'info') =>
    ctx.emit({ level, type, message: `${m.name}: ${text}`, data: { node: m.name, machine: m.id, role: m.role, phase, elapsedMs: elapsed(), ...extra } });
  const fail = (text: string): RunError => new RunError(`${m.name}: ${text}`, { node: m.name, machine: m.id });
  return { elapsed, event, fail };
}

export async function readNodeState(ctx: NodeContext, m: GateMachine): Promise<NodeState> {
  const opts = { deadlineMs: ctx.timings.callDeadlineMs, signal: ctx.hard };
  return ctx.access.withTalos(m.address, async (c) => {
    const [version, stat] = await Promise.all([c.version(opts), c.systemStat(opts)]);
    return { tag: version.tag, bootTime: stat.bootTime };
  });
}

export async function upgradeNode(ctx: NodeContext, m: GateMachine, before: NodeState): Promise<NodeResult> {
  const { params, timings, hard } = ctx;
  const target = params.talosVersion;
  const image = upgradeImageOf(params, m.id);
  const { elapsed, event, fail } = reporting(ctx, m);
  const call = { deadlineMs: timings.callDeadlineMs, signal: hard };
  const stream = { deadlineMs: timings.installDeadlineMs, signal: hard };

  await event('upgrade.node.start', 'start', `upgrading ${before.tag} → ${target}`, { from: before.tag, to: target });
  // Its kept channel would break with the reboot; the gate dials afresh.
  ctx.channels?.forget(m.address);

  let api = apiFor(before.tag);
  // Set once the drain is done, unless the node was cordoned before: then the cordon is not ours to lift.
  let uncordonAfter = false;
  const beforeReboot = async (client: TalosApiClient): Promise<void> => {
    if (ctx.leader === m.name) await forfeitLeadership(ctx, m, client, event);
  };
  try {
    await ctx.access.withTalos(m.address, async (client) => {
      if (api === 'lifecycle') {
        try {
          await event('upgrade.pull', 'pull', `pulling ${image} into the system containerd`, { image });
          const pulled = await client.imagePull({ image }, stream);
          // LifecycleService/Upgrade does not drain (unlike machined's legacy sequence): do it here,
          // as talosctl does. Installing to disk leaves the running pods alone, so the drain runs
          // while the image installs (machined too drains before it installs); only the reboot
          // waits for both.
          await event('upgrade.install', 'install', 'installing with LifecycleService/Upgrade', { api });
          // An install that fails ends the drain where it is: the node is not rebooting after all.
          const stopDrain = new AbortController();
          let drainFailed = false;
          const keepCordon = params.drain !== false && (await cordonOf(ctx, m, fail)) === 'others';
          if (keepCordon) ctx.keptCordons.add(m.name);
          const draining =
            params.drain !== false
              ? drainFor(ctx, m, event, fail, { stop: stopDrain.signal, keepCordon }).then(
                  () => void (uncordonAfter = !keepCordon),
                  (err: unknown) => {
                    drainFailed = !stopDrain.signal.aborted;
                    throw err;
                  },
                )
              : undefined;
          // Its failure is taken once the install is done; until then it must not count as unhandled.
          draining?.catch(() => {});
          // Progress arrives synchronously from the stream; chain the writes so the log keeps its order.
          let progress = Promise.resolve();
          try {
            await client.lifecycleUpgrade(
              { image: pulled.name || image },
              (text) => void (progress = progress.then(() => event('upgrade.install', 'install', text, { api, progress: text }))),
              stream,
            );
            await progress;
          } catch (err) {
            // A failed install's last lines (e.g. the installer's pre-flight refusal) say why: they
            // belong in the log before the uncordon, and must not be lost when the run ends.
            await progress.catch(() => {});
            // Not rebooting after all: the drain stops and the node takes pods again, unless the
            // drain itself failed, which leaves it cordoned on purpose (its reason is in the run).
            stopDrain.abort();
            await draining?.catch(() => {});
            if (draining && !drainFailed && !keepCordon) await uncordon(ctx, m, event, fail).catch(() => {});
            throw err;
          }
          await draining;
          await beforeReboot(client);
          await event('upgrade.reboot', 'reboot', 'rebooting into the new image');
          await rebootTolerant(client, call, event);
          return;
        } catch (err) {
          if (!isUnimplemented(err)) throw err;
          api = 'legacy';
          await event('upgrade.install', 'install', 'the node does not know the v1.13 API; using MachineService/Upgrade', { api }, 'warn');
        }
      }
      if (!params.stage) await beforeReboot(client);
      await event('upgrade.install', 'install', `installing ${image} with MachineService/Upgrade`, { api, image });
      try {
        await client.legacyUpgrade({ image, stage: params.stage, force: params.force, preserve: params.preserve }, call);
      } catch (err) {
        // The node may reboot before its reply arrives; the boot-time check below tells.
        if (params.stage || !isTalosApiError(err) || !err.transient) throw err;
        await event('upgrade.install', 'install', `no reply to Upgrade (${err.code}); checking whether it rebooted`, { api }, 'warn');
        return;
      }
      if (params.stage) {
        await beforeReboot(client);
        await event('upgrade.reboot', 'reboot', 'upgrade staged; rebooting to activate it');
        await rebootTolerant(client, call, event);
      } else {
        await event('upgrade.reboot', 'reboot', 'the node reboots itself into the new image');
      }
    });
  } catch (err) {
    if (err instanceof RunError) throw err;
    throw fail(`upgrade call failed: ${message(err)}`);
  }

  await event('upgrade.wait', 'wait', `waiting for the node to reboot and report ${target}`);
  const back = await waitForReboot(ctx, m, before, fail);
  await ctx.recordVersion(m.id, back.tag);
  await event('upgrade.wait', 'wait', `back on ${back.tag}`, { version: back.tag });
  // Back on the new version: let pods return before the gate, which counts a cordoned node as unhealthy.
  if (uncordonAfter) await uncordon(ctx, m, event, fail);

  await event('upgrade.gate', 'gate', 'checking health');
  await passGate(ctx, m, fail);
  await event('upgrade.gate', 'gate', 'healthy');
  await event('upgrade.node.done', 'done', `upgraded to ${back.tag}`, { api, from: before.tag, to: back.tag });
  return { name: m.name, api, from: before.tag, to: back.tag, elapsedMs: elapsed() };
}

/**
 * A node already on the target may be one an earlier run rebooted but never finished (stopped
 * during the reboot, or its gate failed). It gets what that run still owed it before it counts as
 * done: the uncordon, only of a cordon this product made, and the gate.
 */
export async function settleSkipped(ctx: NodeContext, m: GateMachine): Promise<void> {
  const { event, fail } = reporting(ctx, m);
  const cordon = await cordonOf(ctx, m, fail);
  if (cordon === 'upgrade') await uncordon(ctx, m, event, fail);
  else if (cordon === 'others') ctx.keptCordons.add(m.name);
  await event('upgrade.gate', 'gate', 'checking health');
  await passGate(ctx, m, fail);
  await event('upgrade.gate', 'gate', 'healthy');
}

/** A node may drop the connection before Reboot's reply arrives; whether it rebooted is what the wait finds out. */
async function rebootTolerant(client: TalosApiClient, call: { deadlineMs: number; signal: AbortSignal }, event: NodeEvent): Promise<void> {
  try {
    await client.reboot(call);
  } catch (err) {
    if (!isTalosApiError(err) || !err.transient) throw err;
    await event('upgrade.reboot', 'reboot', `no reply to Reboot (${err.code}); checking whether it rebooted`, {}, 'warn');
  }
}

/**
 * Polls with a fresh connection each time (a channel that saw the node go away would wait out its
 * reconnect backoff). Done when the boot time moved and the version is the target. A node that
 * rebooted into anything else is a failed upgrade, reported and never re-issued.
 */
async function waitForReboot(ctx: NodeContext, m: GateMachine, before: NodeState, fail: (t: string) => RunError): Promise<NodeState> {
  const { timings, hard, params } = ctx;
  const deadline = performance.now() + timings.rebootTimeoutMs;
  const seen: PortWatch = { down: false };
  let last: string;
  for (;;) {
    hard.throwIfAborted();
    try {
      const now = await readNodeState(ctx, m);
      if (now.bootTime !== before.bootTime) {
        if (sameVersion(now.tag, params.talosVersion)) return now;
        await ctx.recordVersion(m.id, now.tag);
        throw fail(`rebooted but runs ${now.tag}, not ${params.talosVersion}: the new image did not take (it may have booted its previous one); not retrying`);
      }
      last = `still up on ${now.tag}, not rebooted yet`;
    } catch (err) {
      if (err instanceof RunError || isTalosApiError(err, 'not-allowed')) throw err;
      hard.throwIfAborted();
      last = message(err);
    }
    if (performance.now() >= deadline) throw fail(`did not come back on ${params.talosVersion} within ${Math.round(timings.rebootTimeoutMs / 1000)}s (${last})`);
    // Once the node has been seen down, it is probed again as soon as its port reopens.
    await untilPortReturns(m.address, Math.min(timings.pollMs, deadline - performance.now()), seen, hard, ctx.access.dialGuard);
  }
}

/** Reads `targets` until `problemsOf` finds nothing wrong, or throws `fail(problems)` once the gate's time is up. */
async function untilHealthy(ctx: NodeContext, targets: GateMachine[], problemsOf: (r: HealthRead) => string[], fail: (problems: string[]) => RunError): Promise<void> {
  const { timings, hard, params } = ctx;
  const deadline = performance.now() + timings.gateTimeoutMs;
  for (;;) {
    const read = await readHealth(ctx.access, targets, { timings, signal: hard, now: ctx.now(), expectTalos: params.talosVersion, ...(ctx.channels ? { channels: ctx.channels } : {}) });
    hard.throwIfAborted();
    const problems = problemsOf(read);
    if (problems.length === 0) return;
    if (performance.now() >= deadline) throw fail(problems);
    // A throttled apiserver's Retry-After holds the next read back, within the gate's time.
    const asked = 'error' in read.kube ? (read.kube.retryAfterMs ?? 0) : 0;
    await sleep(pauseBeforeNextRead(timings.pollMs, asked, deadline - performance.now()), undefined, { signal: hard });
  }
}

const seconds = (ms: number): number => Math.round(ms / 1000);

async function passGate(ctx: NodeContext, m: GateMachine, fail: (t: string) => RunError): Promise<void> {
  const targets = m.role === 'controlplane' ? ctx.controlPlanes : [m];
  const excused = ctx.params.force && ctx.keptCordons.has(m.name) ? new Set([CORDONED_REASON]) : new Set<string>();
  await untilHealthy(ctx, targets, (r) => nodeGateProblems(r, m).filter((p) => !excused.has(p)), (p) => fail(`failed the health gate within ${seconds(ctx.timings.gateTimeoutMs)}s: ${p.join('; ')}`));
}

/**
 * The last word before the cluster's version is recorded: every node on the target and the whole
 * cluster healthy, read afresh (each node's own gate saw only its part, and some long before).
 */
export async function passFinalCheck(ctx: NodeContext, all: GateMachine[]): Promise<void> {
  const target = ctx.params.talosVersion;
  const excused = new Set(ctx.params.force ? [...ctx.keptCordons].map((name) => `${name}: ${CORDONED_REASON}`) : []);
  await untilHealthy(ctx, all, (r) => clusterProblems(r).filter((p) => !excused.has(p)), (p) =>
    new RunError(`every node runs ${target}, but the cluster failed its final health check within ${seconds(ctx.timings.gateTimeoutMs)}s: ${p.join('; ')}; the cluster's version stays as it was until a new run passes this check`, { problems: p }),
  );
}
