// Whether an object the sync changed is ready, read from its status the way kstatus reads it
// (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute), which talosctl's wait uses: what every kind
// says (deletion, the observed generation, the Reconciling and Stalled conditions), then the rules
// of the built-in kinds, then a Ready condition; an object none of these speak for is current.
import type { ObjectRef } from '../../../lib/kube/object-ref.ts';

export interface ObjectStatus {
  /** current: ready; in-progress: not yet; failed: will not get there without a change. */
  state: 'current' | 'in-progress' | 'failed';
  /** `1 of 3 updated, 0 available`, for a run that gives up waiting or fails. */
  message: string;
}

const WORKLOADS = new Set(['Deployment', 'DaemonSet', 'StatefulSet']);

/** The kinds whose readiness is a rollout, always reported while the sync waits. */
export const isWorkload = (ref: ObjectRef): boolean => ref.group === 'apps' && WORKLOADS.has(ref.kind);

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
}
interface Obj {
  apiVersion?: string;
  kind?: string;
  metadata?: { generation?: number; deletionTimestamp?: string; creationTimestamp?: string };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown> & { conditions?: Condition[] };
}

const current = (message = 'ready'): ObjectStatus => ({ state: 'current', message });
const inProgress = (message: string): ObjectStatus => ({ state: 'in-progress', message });
const failed = (message: string): ObjectStatus => ({ state: 'failed', message });
const num = (v: unknown, otherwise = 0): number => (typeof v === 'number' ? v : otherwise);
const said = (c: Condition, otherwise: string): string => c.message || c.reason || otherwise;

/** A workload's rollout: the controller saw the latest spec, every replica runs it and is available. */
function rollout(o: Obj, want: number, updated: number, available: number, noneOld = true): ObjectStatus {
  const seen = num(o.status?.['observedGeneration'], -1) >= num(o.metadata?.generation);
  if (!seen) return inProgress('the controller has not seen the new spec yet');
  const progress = `${updated} of ${want} updated, ${available} available`;
  return updated >= want && available >= want && noneOld ? current(progress) : inProgress(progress);
}

/** The built-in kinds kstatus has rules for, by `group/Kind` (`Kind` for the core group). */
/** How long a pod may stay unscheduled before kstatus calls it failed. */
const SCHEDULE_WINDOW_MS = 15_000;

const KIND_RULES: Record<string, (o: Obj, conditions: Condition[], now: number) => ObjectStatus> = {
  'apps/Deployment': (o, conds) => {
    // The controller gave up on this rollout (spec.progressDeadlineSeconds): it will not finish by waiting.
    const stuck = conds.find((c) => c.type === 'Progressing' && c.reason === 'ProgressDeadlineExceeded');
    if (stuck) return failed(`progress deadline exceeded: ${said(stuck, 'the rollout made no progress')}`);
    const s = o.status ?? {};
    const updated = num(s['updatedReplicas']);
    // Old replicas still running mean the rollout has not finished replacing them.
    return rollout(o, num(o.spec?.['replicas'], 1), updated, num(s['availableReplicas']), num(s['replicas'], updated) <= updated);
  },
  'apps/StatefulSet': (o) => rollout(o, num(o.spec?.['replicas'], 1), num(o.status?.['updatedReplicas']), num(o.status?.['availableReplicas'], num(o.status?.['readyReplicas']))),
  'apps/DaemonSet': (o) => rollout(o, num(o.status?.['desiredNumberScheduled']), num(o.status?.['updatedNumberScheduled']), num(o.status?.['numberAvailable'])),
  'apps/ReplicaSet': (o) => rollout(o, num(o.spec?.['replicas'], 1), num(o.status?.['readyReplicas']), num(o.status?.['availableReplicas'])),
  PersistentVolumeClaim: (o) => (o.status?.['phase'] === 'Bound' ? current('bound') : inProgress(`not bound (phase ${String(o.status?.['phase'] ?? 'unknown')})`)),
  Pod: (o, conds, now) => {
    const phase = o.status?.['phase'];
    // A pod that ran to its end, well or not, has nothing left to become.
    if (phase === 'Succeeded' || phase === 'Failed') return current(phase === 'Succeeded' ? 'completed' : 'completed, not successfully');
    if (phase === 'Pending' && conds.some((c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable')) {
      const created = Date.parse(o.metadata?.creationTimestamp ?? '');
      return Number.isNaN(created) || now - created < SCHEDULE_WINDOW_MS ? inProgress('not scheduled yet') : failed('the pod cannot be scheduled');
    }
    if (phase !== 'Running') return inProgress(`phase ${String(phase ?? 'not reported yet')}`);
    if (conds.some((c) => c.type === 'Ready' && c.status === 'True')) return current('running and ready');
    const statuses = Array.isArray(o.status?.['containerStatuses']) ? (o.status['containerStatuses'] as Array<{ name?: string; state?: { waiting?: { reason?: string } } }>) : [];
    const looping = statuses.filter((c) => c.state?.waiting?.reason === 'CrashLoopBackOff').map((c) => c.name);
    return looping.length ? failed(`containers in CrashLoopBackOff: ${looping.join(', ')}`) : inProgress('running, not ready');
  },
  'batch/Job': (o, conds) => {
    if (conds.some((c) => c.type === 'Complete' && c.status === 'True')) return current('completed');
    const fail = conds.find((c) => c.type === 'Failed' && c.status === 'True');
    if (fail) return failed(`the job failed: ${said(fail, 'Failed')}`);
    if (o.spec?.['suspend'] === true && conds.some((c) => c.type === 'Suspended' && c.status === 'True')) return current('suspended');
    return o.status?.['startTime'] ? current('running') : inProgress('not started');
  },
  Service: (o) => (o.spec?.['type'] === 'LoadBalancer' && !o.spec['clusterIP'] ? inProgress('no cluster IP yet') : current()),
  'apiextensions.k8s.io/CustomResourceDefinition': (_o, conds) => {
    const names = conds.find((c) => c.type === 'NamesAccepted' && c.status === 'False');
    if (names) return failed(said(names, 'names not accepted'));
    const established = conds.find((c) => c.type === 'Established');
    if (established?.status === 'True') return current('established');
    if (established?.status === 'False' && established.reason !== 'Installing') return failed(said(established, 'not established'));
    return inProgress('not established yet');
  },
  Secret: () => current(),
  ConfigMap: () => current(),
  'policy/PodDisruptionBudget': () => current(),
  'batch/CronJob': () => current(),
};

/** kstatus' verdict on an object as the server answers it, at `now` (ms). */
export function statusOf(object: unknown, now = Date.now()): ObjectStatus {
  const o = object as Obj;
  if (o.metadata?.deletionTimestamp) return inProgress('being deleted');
  const generation = o.metadata?.generation;
  const observed = o.status?.['observedGeneration'];
  if (typeof generation === 'number' && typeof observed === 'number' && observed !== generation) {
    return inProgress(`generation ${generation} not observed yet (the controller saw ${observed})`);
  }
  const conds = Array.isArray(o.status?.conditions) ? o.status.conditions : [];
  const reconciling = conds.find((c) => c.type === 'Reconciling' && c.status === 'True');
  if (reconciling) return inProgress(said(reconciling, 'reconciling'));
  const stalled = conds.find((c) => c.type === 'Stalled' && c.status === 'True');
  if (stalled) return failed(said(stalled, 'stalled'));
  const group = o.apiVersion?.includes('/') ? o.apiVersion.split('/')[0] : '';
  const rule = KIND_RULES[group ? `${group}/${o.kind}` : String(o.kind)];
  if (rule) return rule(o, conds, now);
  const ready = conds.find((c) => c.type === 'Ready');
  if (ready) return ready.status === 'True' ? current() : inProgress(said(ready, 'not ready'));
  return current();
}
