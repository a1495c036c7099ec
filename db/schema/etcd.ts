import { index, integer, primaryKey, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { clusters } from './core.ts';

/** Why a snapshot was taken: asked for, the schedule, or right before an upgrade touched a node. */
export const SNAPSHOT_TRIGGERS = ['manual', 'schedule', 'upgrade'] as const;
export type SnapshotTrigger = (typeof SNAPSHOT_TRIGGERS)[number];

/**
 * etcd snapshots taken with MachineService/EtcdSnapshot. The snapshot itself is sealed with the
 * master key and kept in the database, inside the data dir: as `chunks` sealed pieces in
 * etcd_snapshot_chunks (each bound to cluster, snapshot id and position), or, for snapshots
 * taken before those, whole in `sealed` (bound to cluster and snapshot id). A row is written
 * only once every chunk is stored, so a listed snapshot is always complete.
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
    /** The whole snapshot, sealed (older rows); null when it is stored in chunks. */
    sealed: text('sealed'),
    /** How many rows of etcd_snapshot_chunks hold it (seq 0..chunks-1); null for a `sealed` row. */
    chunks: integer('chunks'),
  },
  (t) => [index('etcd_snapshots_cluster').on(t.clusterId, t.createdAt)],
);

/**
 * One sealed piece of a snapshot, in order by `seq`. Written while the snapshot streams, before
 * its etcd_snapshots row exists (hence no foreign key to it): chunks without a row are a
 * snapshot that failed or was cut off, and are deleted by the next snapshot of the cluster.
 */
export const etcdSnapshotChunks = sqliteTable(
  'etcd_snapshot_chunks',
  {
    snapshotId: text('snapshot_id').notNull(),
    seq: integer('seq').notNull(),
    clusterId: text('cluster_id')
      .notNull()
      .references(() => clusters.id, { onDelete: 'cascade' }),
    sealed: text('sealed').notNull(),
  },
  (t) => [primaryKey({ columns: [t.snapshotId, t.seq] }), index('etcd_snapshot_chunks_cluster').on(t.clusterId)],
);
