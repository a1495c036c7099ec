// etcd defragmentation: etcd never gives back the space that compaction frees in its database
// file, and once the file reaches its quota etcd raises a NOSPACE alarm and refuses every write
// (the Kubernetes API stops taking changes). Defragmenting rewrites the file; the alarm then has
// to be disarmed. A member answers nothing while it defragments, so members go one at a time,
// followers first and the leader last, each read again before the next.
import { eq } from 'drizzle-orm';
import { talosDialer } from '../../../functions/machine-config/access.ts';
import { clusters } from '../../../db/schema/index.ts';
import type { MachineRow } from '../../../functions/inventory/load.ts';
import type { Deps } from '../../../functions/context.ts';
import type { EtcdDefragParams } from '../../../functions/etcd/job.ts';
import { formatBytes } from '../../../lib/bytes.ts';
import { errorMessage } from '../../../lib/errors.ts';
import { abortedUnlessCanceled, RunError, type JobExecutor } from '../../../lib/jobs/executor.ts';
import type { EtcdMemberAlarm, EtcdMemberStatus } from '../../../lib/talos/api/index.ts';
import { clusterAccess } from '../cluster-access.ts';
import { pushTimings } from '../push-config/timings.ts';
import { reachableControlPlanes } from './control-planes.ts';

export interface DefragResult {
  defragmented: Array<{ name: string; before: number; after: number }>;
  disarmed: EtcdMemberAlarm[];
  /** Members left for a later run when this one was canceled. */
  remaining: string[];
}

export const etcdDefragExecutor: JobExecutor<Deps, EtcdDefragParams> = async ({ run, deps, emit, signal }) => {
  const t = pushTimings(deps);
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, run.clusterId!)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  const dial = await talosDialer(deps, cluster.id);
  const cps = await reachableControlPlanes(deps, cluster.id, dial);
  const access = await clusterAccess(deps, cluster);
  // A cancel lets the member in flight finish; a shutdown stops at once.
  const hard = abortedUnlessCanceled(signal);
  const call = { deadlineMs: t.callDeadlineMs, signal: hard };

  const statusOf = (m: MachineRow): Promise<EtcdMemberStatus> => access.withTalos(dial(m)!, (c) => c.etcdStatus(call));

  // Every member must answer first: while one defragments, the others carry the cluster.
  const problems: string[] = [];
  const before = new Map<string, EtcdMemberStatus>();
  for (const m of cps) {
    try {
      before.set(m.id, await statusOf(m));
    } catch (err) {
      hard.throwIfAborted();
      problems.push(`${m.name}: ${errorMessage(err)}`);
    }
  }
  if (problems.length) throw new RunError(`refusing to defragment: not every etcd member answers: ${problems.join('; ')}`, { problems });
  const first = cps[0]!;
  const raised = await access.withTalos(dial(first)!, (c) => c.etcdAlarmList(call));
  const corrupt = raised.filter((a) => a.alarm === 'CORRUPT').map((a) => a.memberId);
  if (corrupt.length) {
    throw new RunError(`refusing to defragment: etcd reports data corruption on member ${corrupt.join(', ')}; restore that member from a snapshot instead`, { corrupt });
  }

  const leader = before.get(first.id)!.leader;
  const order = [...cps.filter((m) => before.get(m.id)!.memberId !== leader), ...cps.filter((m) => before.get(m.id)!.memberId === leader)];
  await emit({
    type: 'etcd.defrag.plan',
    message: `defragmenting ${order.map((m) => m.name).join(', ')} one at a time (the leader last)${raised.length ? `; raised alarms: ${raised.map((a) => `${a.alarm} on ${a.memberId}`).join(', ')}` : ''}`,
    data: { order: order.map((m) => m.name), alarms: raised },
  });

  const result: DefragResult = { defragmented: [], disarmed: [], remaining: [] };
  for (const [i, m] of order.entries()) {
    if (signal.aborted) {
      hard.throwIfAborted();
      result.remaining = order.slice(i).map((x) => x.name);
      await emit({ level: 'warn', type: 'etcd.defrag.stopped', message: `canceled; not defragmented: ${result.remaining.join(', ')}`, data: { remaining: result.remaining } });
      return result;
    }
    const was = before.get(m.id)!;
    await emit({ type: 'etcd.defrag.start', message: `${m.name}: defragmenting (${formatBytes(was.dbSize)}, ${formatBytes(was.dbSizeInUse)} in use)`, data: { name: m.name } });
    const now = await access.withTalos(dial(m)!, async (c) => {
      await c.etcdDefragment({ deadlineMs: t.readyTimeoutMs, signal: hard });
      return c.etcdStatus(call);
    }).catch((err: unknown) => {
      hard.throwIfAborted();
      throw new RunError(`${m.name}: defragmentation failed: ${errorMessage(err)}`, { name: m.name });
    });
    result.defragmented.push({ name: m.name, before: was.dbSize, after: now.dbSize });
    await emit({
      type: 'etcd.defrag.done',
      message: `${m.name}: ${formatBytes(was.dbSize)} → ${formatBytes(now.dbSize)}`,
      data: { name: m.name, before: was.dbSize, after: now.dbSize },
    });
  }

  // The alarm outlives the space it was raised for: writes stay refused until it is disarmed.
  if (raised.some((a) => a.alarm === 'NOSPACE')) {
    result.disarmed = await access.withTalos(dial(first)!, (c) => c.etcdAlarmDisarm(call));
    await emit({ type: 'etcd.alarm.disarm', message: `disarmed ${result.disarmed.map((a) => `${a.alarm} on ${a.memberId}`).join(', ') || 'nothing (already cleared)'}`, data: { disarmed: result.disarmed } });
  }
  return result;
};
