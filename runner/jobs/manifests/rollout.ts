// Whether a workload the sync changed has rolled out, read from its status the way kstatus (and so
// talosctl's wait) reads it: the controller saw the latest spec, and every replica runs it and is
// available.
import type { ObjectRef } from '../../../lib/kube/object-ref.ts';

export interface Rollout {
  done: boolean;
  /** `1 of 3 updated, 0 available`, for a run that gives up waiting. */
  progress: string;
}

const WORKLOADS = new Set(['Deployment', 'DaemonSet', 'StatefulSet']);

export const isWorkload = (ref: ObjectRef): boolean => ref.group === 'apps' && WORKLOADS.has(ref.kind);

type Obj = { kind?: string; metadata?: { generation?: number }; spec?: { replicas?: number }; status?: Record<string, number | undefined> };

/** undefined for a kind that has no rollout. */
export function rolloutOf(object: unknown): Rollout | undefined {
  const o = object as Obj;
  const s = o.status ?? {};
  const seen = (s['observedGeneration'] ?? 0) >= (o.metadata?.generation ?? 0);
  const verdict = (want: number, updated: number, available: number, extra = true): Rollout => ({
    done: seen && updated >= want && available >= want && extra,
    progress: seen ? `${updated} of ${want} updated, ${available} available` : 'the controller has not seen the new spec yet',
  });
  switch (o.kind) {
    case 'Deployment': {
      const want = o.spec?.replicas ?? 1;
      const updated = s['updatedReplicas'] ?? 0;
      // Old replicas still running mean the rollout has not finished replacing them.
      return verdict(want, updated, s['availableReplicas'] ?? 0, (s['replicas'] ?? updated) <= updated);
    }
    case 'StatefulSet': {
      const want = o.spec?.replicas ?? 1;
      return verdict(want, s['updatedReplicas'] ?? 0, s['availableReplicas'] ?? s['readyReplicas'] ?? 0);
    }
    case 'DaemonSet':
      return verdict(s['desiredNumberScheduled'] ?? 0, s['updatedNumberScheduled'] ?? 0, s['numberAvailable'] ?? 0);
    default:
      return undefined;
  }
}
