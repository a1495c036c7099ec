// Reads one node's Talos API for a collect pass. Every call is independent, so they all go out at
// once over the node's single HTTP/2 channel: a node that does not answer costs one deadline,
// not one per call.
import { isTalosApiError, type TalosApiClient } from '../../../lib/talos/api/index.ts';
import { errorMessage } from '../../../lib/errors.ts';
import type { CallError, Failed, MachineRole, TalosReport } from '../../../functions/collect/types.ts';

export interface NodeRead {
  talos: TalosReport | Failed;
  /** The hostname the node reports (its Kubernetes node name), when it answered. */
  hostname: string | null;
  /** First failure of a call that did not sink the whole read (e.g. DiskStats alone failed). */
  partialError: string | null;
}

export function callError(err: unknown): CallError {
  if (isTalosApiError(err)) return { code: err.code, message: err.message };
  return { code: 'internal', message: errorMessage(err) };
}

function settledValue<T>(r: PromiseSettledResult<T>): T | undefined {
  return r.status === 'fulfilled' ? r.value : undefined;
}

/** Version and ServiceList are required: without them there is no report, only the error. */
export async function readNode(client: TalosApiClient, role: MachineRole, opts: { deadlineMs: number; signal?: AbortSignal }): Promise<NodeRead> {
  const call = { deadlineMs: opts.deadlineMs, ...(opts.signal ? { signal: opts.signal } : {}) };
  const cp = role === 'controlplane';
  const [version, hostname, services, memory, loadavg, systemStat, diskStats, members, etcdStatus, mounts] = await Promise.allSettled([
    client.version(call),
    client.hostname(call),
    client.serviceList(call),
    client.memory(call),
    client.loadAvg(call),
    client.systemStat(call),
    client.diskStats(call),
    cp ? client.etcdMemberList(call) : Promise.resolve(undefined),
    cp ? client.etcdStatus(call) : Promise.resolve(undefined),
    client.mounts(call),
  ]);
  if (version.status === 'rejected') return { talos: { error: callError(version.reason) }, hostname: null, partialError: null };
  if (services.status === 'rejected') return { talos: { error: callError(services.reason) }, hostname: null, partialError: null };

  const optional = [hostname, memory, loadavg, systemStat, diskStats, members, etcdStatus, mounts];
  const firstFailure = optional.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  const report: TalosReport = {
    version: { tag: version.value.tag },
    services: services.value.map((s) => ({ id: s.id, state: s.state, ...(s.health ? { health: s.health } : {}) })),
  };
  const mem = settledValue(memory);
  if (mem) report.memory = mem;
  const load = settledValue(loadavg);
  if (load) report.loadavg = load;
  const stat = settledValue(systemStat);
  if (stat?.cpuTotal) report.systemStat = { cpuTotal: stat.cpuTotal, cpu: stat.cpu };
  const disks = settledValue(diskStats);
  if (disks) report.diskStats = { ...(disks.total ? { total: disks.total } : {}), devices: disks.devices };
  const mnt = settledValue(mounts);
  if (mnt) report.mounts = mnt;
  if (cp) {
    if (members.status === 'rejected') report.etcd = { error: callError(members.reason) };
    else report.etcd = { members: members.value ?? [], ...(etcdStatus.status === 'fulfilled' && etcdStatus.value ? { status: etcdStatus.value } : {}) };
  }
  return {
    talos: report,
    hostname: settledValue(hostname) || null,
    partialError: firstFailure ? callError(firstFailure.reason).message : null,
  };
}
