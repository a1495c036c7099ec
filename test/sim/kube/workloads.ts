// The Deployment and DaemonSet controllers, as far as a rollout's status goes: a spec change
// (a generation bump) is observed at once, the new pods count as neither updated nor available,
// and after the rollout knob's `ms` all of them are (never when `stuck`; a stuck Deployment then
// reports ProgressDeadlineExceeded after spec.progressDeadlineSeconds, as kubectl rollout status
// and kstatus expect). Counts and conditions are the controllers' own, with their omitempty zeros.
// Objects a test seeds (putObject, setDaemonSet) start settled: Talos created them long ago.
import { createHash } from 'node:crypto';
import { isObj, type Obj } from './fields.ts';
import type { ObjectEvent, ObjectStore, StoredObject } from './objects.ts';

export interface Rollout {
  ms: number;
  stuck: boolean;
}

type Phase = 'rolling' | 'done' | 'timedOut';

const omitZero = (fields: Record<string, number>): Record<string, number> => Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== 0));

/** A pod-template-hash lookalike: stable per template, in the controller's safe alphabet. */
function templateHash(o: StoredObject): string {
  const spec = isObj(o.body.spec) ? o.body.spec : {};
  const digest = createHash('sha256').update(JSON.stringify(spec.template ?? {})).digest();
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  return [...digest.subarray(0, 10)].map((b) => alphabet[b % alphabet.length]).join('');
}

/** A condition that keeps its lastTransitionTime while its status does not change, like the controllers' SetCondition. */
function condition(prev: Obj | undefined, type: string, status: boolean, reason: string, message: string): Obj {
  const at = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const old = (Array.isArray(prev?.conditions) ? prev.conditions : []).find((c: Obj) => c.type === type) as Obj | undefined;
  const s = status ? 'True' : 'False';
  return { type, status: s, lastUpdateTime: at, lastTransitionTime: old?.status === s ? old.lastTransitionTime : at, reason, message };
}

function deploymentStatus(o: StoredObject, desired: number, phase: Phase): Obj {
  const rs = `ReplicaSet "${o.name}-${templateHash(o)}"`;
  const ready = phase === 'done' ? desired : 0;
  const progressing =
    phase === 'done'
      ? condition(o.status, 'Progressing', true, 'NewReplicaSetAvailable', `${rs} has successfully progressed.`)
      : phase === 'rolling'
        ? condition(o.status, 'Progressing', true, 'ReplicaSetUpdated', `${rs} is progressing.`)
        : condition(o.status, 'Progressing', false, 'ProgressDeadlineExceeded', `${rs} has timed out progressing.`);
  const available =
    ready >= desired
      ? condition(o.status, 'Available', true, 'MinimumReplicasAvailable', 'Deployment has minimum availability.')
      : condition(o.status, 'Available', false, 'MinimumReplicasUnavailable', 'Deployment does not have minimum availability.');
  return {
    observedGeneration: o.generation ?? 1,
    ...omitZero({ replicas: desired, updatedReplicas: ready, readyReplicas: ready, availableReplicas: ready, unavailableReplicas: desired - ready }),
    conditions: [available, progressing],
  };
}

function daemonSetStatus(o: StoredObject, desired: number, phase: Phase): Obj {
  const ready = phase === 'done' ? desired : 0;
  return {
    currentNumberScheduled: desired,
    numberMisscheduled: 0,
    desiredNumberScheduled: desired,
    numberReady: ready,
    observedGeneration: o.generation ?? 1,
    ...omitZero({ updatedNumberScheduled: ready, numberAvailable: ready, numberUnavailable: desired - ready }),
  };
}

export class WorkloadControllers {
  /** DaemonSets whose scheduled pod count the test fixed (setDaemonSet's `desired`), by namespace/name. */
  private readonly pinned = new Map<string, number>();
  private readonly pending = new Map<string, Set<NodeJS.Timeout>>();

  constructor(
    private readonly store: ObjectStore,
    private readonly env: { nodeCount: () => number; rollout: () => Rollout; timers: Set<NodeJS.Timeout> },
  ) {
    store.watch((e) => this.observe(e));
  }

  pin(namespace: string, name: string, desired: number): void {
    this.pinned.set(`${namespace}/${name}`, desired);
  }

  private desired(o: StoredObject): number {
    if (o.resource === 'daemonsets') return this.pinned.get(`${o.namespace}/${o.name}`) ?? Math.max(1, this.env.nodeCount());
    const replicas = isObj(o.body.spec) ? o.body.spec.replicas : undefined;
    return typeof replicas === 'number' ? replicas : 1;
  }

  private observe(e: ObjectEvent): void {
    const o = e.obj;
    if (o.group !== 'apps' || (o.resource !== 'deployments' && o.resource !== 'daemonsets')) return;
    if (e.change === 'deleted') {
      this.cancel(o.uid);
      this.pinned.delete(`${o.namespace}/${o.name}`);
      return;
    }
    if (!e.specChanged) return;
    this.cancel(o.uid);
    const desired = this.desired(o);
    const status = (phase: Phase): Obj => (o.resource === 'deployments' ? deploymentStatus(o, desired, phase) : daemonSetStatus(o, desired, phase));
    const rollout = this.env.rollout();
    if (e.seeded || (!rollout.stuck && rollout.ms <= 0)) {
      o.status = status('done');
      return;
    }
    o.status = status('rolling');
    const generation = o.generation;
    const later = (ms: number, phase: Phase): void => {
      const t = setTimeout(() => {
        this.env.timers.delete(t);
        this.pending.get(o.uid)?.delete(t);
        const cur = this.store.stored(o);
        if (!cur || cur.uid !== o.uid || cur.generation !== generation) return;
        if (phase === 'done') this.cancel(o.uid);
        this.store.setStatus(cur, o.resource === 'deployments' ? deploymentStatus(cur, desired, phase) : daemonSetStatus(cur, desired, phase));
      }, ms);
      this.env.timers.add(t);
      const mine = this.pending.get(o.uid) ?? new Set();
      mine.add(t);
      this.pending.set(o.uid, mine);
    };
    if (!rollout.stuck) later(rollout.ms, 'done');
    if (o.resource === 'deployments') {
      const deadline = isObj(o.body.spec) && typeof o.body.spec.progressDeadlineSeconds === 'number' ? o.body.spec.progressDeadlineSeconds : 600;
      if (rollout.stuck || rollout.ms > deadline * 1000) later(deadline * 1000, 'timedOut');
    }
  }

  private cancel(uid: string): void {
    for (const t of this.pending.get(uid) ?? []) {
      clearTimeout(t);
      this.env.timers.delete(t);
    }
    this.pending.delete(uid);
  }
}
