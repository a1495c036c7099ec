import { z } from 'zod';
import { defineJob, type JobParams } from '../../lib/jobs/spec.ts';

/** Streams an etcd snapshot from a healthy control plane and stores it sealed (runner/jobs/etcd). */
export const etcdSnapshotJob = defineJob(
  'etcd-snapshot',
  z.strictObject({
    trigger: z.enum(['manual', 'schedule']),
    /** Snapshots kept per cluster; older ones are deleted after a successful snapshot. */
    keep: z.number().int().min(1),
  }),
);
export type EtcdSnapshotParams = JobParams<typeof etcdSnapshotJob>;

/** Restores etcd on a control plane from a stored snapshot: EtcdRecover upload, then Bootstrap{recover_etcd}. */
export const etcdRestoreJob = defineJob('etcd-restore', z.strictObject({ snapshot: z.string(), machine: z.string() }));
export type EtcdRestoreParams = JobParams<typeof etcdRestoreJob>;

/**
 * Defragments every control plane's etcd member, one at a time and the leader last, then disarms a
 * NOSPACE alarm (runner/jobs/etcd/defrag.ts).
 */
export const etcdDefragJob = defineJob('etcd-defrag', z.strictObject({}));
export type EtcdDefragParams = JobParams<typeof etcdDefragJob>;

export const DEFAULT_SNAPSHOT_KEEP = 7;

/** The seal context binds a snapshot to its cluster and id, so a sealed value moved elsewhere does not open. */
export const snapshotSealContext = (clusterId: string, id: string): string => `etcd-snapshot:${clusterId}:${id}`;
