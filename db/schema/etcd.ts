import { index, integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { clusters } from './core.ts';

/** Why a snapshot was taken: asked for, the schedule, or right before an upgrade touched a node. */
export const SNAPSHOT_TRIGGERS = ['manual', 'schedule', 'upgrade'] as const;
export type SnapshotTrigger = (typeof SNAPSHOT_TRIGGERS)[number];

/**
 * etcd snapshots taken with MachineService/EtcdSnapshot. The snapshot itself is sealed with the
 * master key (bound to cluster and snapshot id) and kept in the database, inside the data dir.
 */
export const etcdSnapshots = sqliteTable(
  'etcd_snapshots',
  {
    id: text('id').primaryKey(),
    clusterId: text('cluster_id')
      .notNull()
      .references(() => clusters.id, { onDelete: 'cascade' }),
    createdAt: integer('created_at').notNull(),
    /** Control plane it was streamed from. */
    machineName: text('machine_name').notNull(),
    sizeBytes: integer('size_bytes').notNull(),
    /** The member's raft index read right before the snapshot (uint64 as text). */
    revision: text('revision').notNull(),
    sha256: text('sha256').notNull(),
    trigger: text('trigger', { enum: SNAPSHOT_TRIGGERS }).notNull(),
    runId: text('run_id'),
    sealed: text('sealed').notNull(),
  },
  (t) => [index('etcd_snapshots_cluster').on(t.clusterId, t.createdAt)],
);
