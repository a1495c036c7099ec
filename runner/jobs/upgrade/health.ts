// Health reads for the upgrade gates: each Talos node's version, services and (control planes)
// etcd view, plus one Kubernetes snapshot, judged by the same pure assessment the collect pass uses.
import { collectKubernetes, KubeApiError, loadKubernetesClient, retryAfterOf, type KubeSnapshot } from '../../../lib/kube/index.ts';
import { isTalosApiError } from '../../../lib/talos/api/index.ts';
import { assessCluster } from '../collect/assess.ts';
import type { ClusterAssessment, Failed, MachineInput, TalosReport } from '../../../functions/collect/types.ts';
import type { ClusterAccess } from '../cluster-access.ts';
import type { RunChannels } from './channels.ts';
import { errorMessage } from '../../../lib/errors.ts';
import pLimit from 'p-limit';
import type { UpgradeTimings } from '../../../functions/settings.ts';

export interface GateMachine {
  id: string;
  name: string;
  role: 'controlplane' | 'worker';
  address: string;
}

function failed(err: unknown): Failed {
  const code = isTalosApiError(err) || err instanceof KubeApiError ? err.code : 'error';
  return { error: { code, message: errorMessage(err) } };
}

export async function readTalosReport(access: ClusterAccess, m: GateMachine, t: UpgradeTimings, signal: AbortSignal, channels?: RunChannels): Promise<TalosReport | Failed> {
  let client;
  let failedRead = false;
  try {
    client = channels ? await channels.talos(m.address) : await access.talosClient(m.address);
    const opts = { deadlineMs: t.callDeadlineMs, signal };
    const [version, services] = await Promise.all([client.version(opts), client.serviceList(opts)]);
    const report: TalosReport = {
      version: { tag: version.tag },
      services: services.map((s) => ({
        id: s.id,
        state: s.state,
        ...(s.health ? { health: { healthy: s.health.healthy, unknown: s.health.unknown, lastMessage: s.health.lastMessage } } : {}),
      })),
    };
    if (m.role === 'controlplane') {
      try {
        const [members, status] = await Promise.all([client.etcdMemberList(opts), client.etcdStatus(opts)]);
        report.etcd = {
          members: members.map((x) => ({ id: x.id, hostname: x.hostname, isLearner: x.isLearner })),
          status: { memberId: status.memberId, leader: status.leader, errors: status.errors, isLearner: status.isLearner },
        };
      } catch (err) {
        failedRead = true;
        report.etcd = failed(err);
      }
    }
    return report;
  } catch (err) {
    failedRead = true;
    return failed(err);
  } finally {
    // A kept channel that failed once is dialled afresh next time rather than left in backoff.
    if (!channels) client?.close();
    else if (failedRead) channels.forget(m.address);
  }
}

/** A failed read, with how long the apiserver asked to be left alone when it did (Retry-After). */
type KubeFailed = Failed & { retryAfterMs?: number };

export async function readKube(access: ClusterAccess, t: UpgradeTimings, signal: AbortSignal, channels?: RunChannels): Promise<KubeSnapshot | KubeFailed> {
  try {
    const agent = await channels?.kubeAgent();
    return await collectKubernetes(await access.kubeconfig(), { deadlineMs: t.kubeDeadlineMs, signal, guard: access.dialGuard, ...(agent ? { agent } : {}) });
  } catch (err) {
    const asked = retryAfterOf(err);
    return { ...failed(err), ...(asked > 0 ? { retryAfterMs: asked } : {}) };
  }
}

export interface HealthRead {
  assessment: ClusterAssessment;
  kube: KubeSnapshot | KubeFailed;
}

/** Reads `machines` and the Kubernetes API once and assesses them; `expectTalos` flags nodes on another version. */
export async function readHealth(
  access: ClusterAccess,
  machines: GateMachine[],
  opts: { timings: UpgradeTimings; signal: AbortSignal; now: number; expectTalos?: string; channels?: RunChannels },
): Promise<HealthRead> {
  // Before any call starts its deadline: loading the client stalls the event loop.
  await loadKubernetesClient();
  const limit = pLimit(opts.timings.readConcurrency);
  const [talos, kube] = await Promise.all([
    Promise.all(machines.map((m) => limit(() => readTalosReport(access, m, opts.timings, opts.signal, opts.channels)))),
    readKube(access, opts.timings, opts.signal, opts.channels),
  ]);
  const inputs: MachineInput[] = machines.map((m, i) => ({ id: m.id, name: m.name, role: m.role, talos: talos[i]! }));
  const assessment = assessCluster({
    machines: inputs,
    kube,
    now: opts.now,
    ...(opts.expectTalos ? { expected: { talosVersion: opts.expectTalos } } : {}),
  });
  return { assessment, kube };
}

/** Why the cluster may not be touched now (empty: go ahead). Every machine, Kubernetes and etcd must be healthy. */
export function clusterProblems(read: HealthRead): string[] {
  if (read.assessment.state === 'healthy') return [];
  return read.assessment.reasons.length ? read.assessment.reasons : [`cluster health is ${read.assessment.state}`];
}

const ETCD_REASON = /^etcd /;

/**
 * Why an upgraded node does not pass its gate (empty: it does): its Talos services and version,
 * its Kubernetes node Ready, and for a control plane the whole etcd membership healthy again.
 */
export function nodeGateProblems(read: HealthRead, m: GateMachine): string[] {
  const problems: string[] = [];
  if ('error' in read.kube) problems.push(`Kubernetes API unreadable: ${read.kube.error.message}`);
  const self = read.assessment.machines.find((x) => x.id === m.id);
  problems.push(...(self?.reasons ?? ['node was not read']));
  if (m.role === 'controlplane') problems.push(...read.assessment.reasons.filter((r) => ETCD_REASON.test(r)));
  return problems;
}
