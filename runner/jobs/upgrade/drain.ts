// The Kubernetes and etcd courtesies around one node's reboot: drain before, uncordon after, and
// for the etcd leader a leadership hand-over right before it goes down.
import { RunError } from '../../../lib/jobs/executor.ts';
import type { RunEventInput } from '../../../lib/jobs/types.ts';
import { DrainTimeoutError, drainNode, getIfExists, openKubeWriter, setUnschedulable, type KubeWriter } from '../../../lib/kube/drain.ts';
import type { TalosApiClient } from '../../../lib/talos/api/index.ts';
import { errorMessage } from '../../../lib/errors.ts';
import type { UpgradeTimings } from '../../../functions/settings.ts';
import type { ClusterAccess } from '../cluster-access.ts';
import type { RunChannels } from './channels.ts';
import type { GateMachine } from './health.ts';

/** The part of a node's upgrade context these steps use (node.ts's NodeContext satisfies it). */
interface NodeContext {
  access: ClusterAccess;
  channels?: RunChannels;
  params: { drainTimeoutMs?: number | undefined };
  timings: UpgradeTimings;
  hard: AbortSignal;
}

/**
 * Set with the upgrade's cordon and removed with its uncordon: a later run may then finish an
 * uncordon its predecessor never got to, without lifting a cordon an operator made by hand.
 */
export const CORDON_ANNOTATION = 'rezuscloud.io/cordoned-for-upgrade';

/** kubectl drain's and talosctl's default. */
export const DEFAULT_DRAIN_TIMEOUT_MS = 5 * 60_000;

type Event = (type: string, phase: string, text: string, extra?: Record<string, unknown>, level?: RunEventInput['level']) => Promise<void>;

async function withWriter<T>(ctx: NodeContext, fn: (w: KubeWriter) => Promise<T>): Promise<T> {
  const w = ctx.channels ? await ctx.channels.kubeWriter(ctx.timings.kubeDeadlineMs) : await openKubeWriter(await ctx.access.kubeconfig(), ctx.timings.kubeDeadlineMs, { guard: ctx.access.dialGuard });
  try {
    return await fn(w);
  } finally {
    w.close();
  }
}

/**
 * Cordons the node and evicts its pods. A drain that runs out of time stops the run before the
 * reboot and leaves the node cordoned (its pods may be half moved; the operator decides). A cancel
 * lets the drain finish like the rest of the node in flight. `keepCordon`: the node was cordoned
 * by someone else before the upgrade (see cordonOf); it is drained as it is, and its cordon is
 * neither marked as the upgrade's nor lifted after.
 */
export async function drainFor(
  ctx: NodeContext,
  m: GateMachine,
  event: Event,
  fail: (t: string) => RunError,
  opts: { stop?: AbortSignal; keepCordon?: boolean } = {},
): Promise<void> {
  const timeoutMs = ctx.params.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
  const timeout = `timeout ${Math.round(timeoutMs / 1000)}s`;
  if (opts.keepCordon) await event('upgrade.drain', 'drain', `already cordoned, not by an upgrade: draining (${timeout}); it stays cordoned after`, { timeoutMs, keepCordon: true }, 'warn');
  else await event('upgrade.drain', 'drain', `cordoning and draining (${timeout})`, { timeoutMs });
  try {
    const r = await withWriter(ctx, (w) =>
      drainNode(w, m.name, {
        timeoutMs,
        retryMs: ctx.timings.pollMs,
        signal: opts.stop ? AbortSignal.any([ctx.hard, opts.stop]) : ctx.hard,
        ...(opts.keepCordon ? { cordon: false } : { annotations: { [CORDON_ANNOTATION]: 'true' } }),
        onEvent: async (e) => {
          const pod = `${e.pod.namespace}/${e.pod.name}`;
          if (e.type === 'skip') await event('upgrade.drain', 'drain', `leaving ${pod} (${e.message})`, { pod, action: 'skip' });
          else if (e.type === 'evict') await event('upgrade.drain', 'drain', `evicted ${pod}`, { pod, action: 'evict' });
          else if (e.type === 'blocked') await event('upgrade.drain', 'drain', `eviction of ${pod} refused, retrying: ${e.message ?? ''}`, { pod, action: 'blocked' }, 'warn');
        },
      }),
    );
    await event('upgrade.drain', 'drain', `drained: ${r.evicted.length} evicted, ${r.skipped.length} left in place`, { evicted: r.evicted.length, skipped: r.skipped.length });
  } catch (err) {
    ctx.hard.throwIfAborted();
    if (err instanceof DrainTimeoutError) {
      await event('upgrade.drain', 'drain', `${err.message}; not rebooting, node left cordoned`, { remaining: err.remaining }, 'error');
      throw new RunError(`${m.name}: ${err.message}; the node was not rebooted and is left cordoned`, { node: m.name, machine: m.id, remaining: err.remaining });
    }
    throw fail(`drain failed: ${errorMessage(err)}; the node was not rebooted and may be cordoned`);
  }
}

export async function uncordon(ctx: NodeContext, m: GateMachine, event: Event, fail: (t: string) => RunError): Promise<void> {
  try {
    await withWriter(ctx, (w) => setUnschedulable(w, m.name, false, ctx.hard, { [CORDON_ANNOTATION]: null }));
  } catch (err) {
    throw fail(`upgraded but could not uncordon: ${errorMessage(err)}`);
  }
  await event('upgrade.uncordon', 'uncordon', 'uncordoned');
}

/**
 * Whose cordon the node carries: none, the upgrade's (its mark is on the node: an earlier run's
 * uncordon may still be owed), or someone else's (unschedulable without the mark: cordoned on
 * purpose, which an upgrade leaves as it found it). A node Kubernetes does not know has none.
 */
export async function cordonOf(ctx: NodeContext, m: GateMachine, fail: (t: string) => RunError): Promise<'none' | 'upgrade' | 'others'> {
  try {
    const node = (await withWriter(ctx, (w) => getIfExists(w, `/api/v1/nodes/${encodeURIComponent(m.name)}`, ctx.hard))) as
      | { metadata?: { annotations?: Record<string, string> }; spec?: { unschedulable?: boolean } }
      | undefined;
    if (node?.metadata?.annotations?.[CORDON_ANNOTATION] !== undefined) return 'upgrade';
    return node?.spec?.unschedulable === true ? 'others' : 'none';
  } catch (err) {
    ctx.hard.throwIfAborted();
    throw fail(`cannot read its Kubernetes node: ${errorMessage(err)}`);
  }
}

/** Moves etcd leadership away before the leader reboots; a failure is logged, not fatal (etcd elects anyway). */
export async function forfeitLeadership(ctx: NodeContext, m: GateMachine, client: TalosApiClient, event: Event): Promise<void> {
  try {
    const r = await client.etcdForfeitLeadership({ deadlineMs: ctx.timings.callDeadlineMs, signal: ctx.hard });
    await event('upgrade.forfeit', 'forfeit', r.member ? 'etcd leadership handed to a peer' : 'no longer the etcd leader; nothing to hand over', { member: r.member });
  } catch (err) {
    ctx.hard.throwIfAborted();
    await event('upgrade.forfeit', 'forfeit', `EtcdForfeitLeadership failed: ${errorMessage(err)}; rebooting anyway`, {}, 'warn');
  }
}
