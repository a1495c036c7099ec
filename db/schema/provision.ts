import { index, integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { clusters, runs } from './core.ts';

/** A saved tofu plan waiting for approval. The plan file embeds variable values, so it is sealed. */
export const provisionPlans = sqliteTable(
  'provision_plans',
  {
    runId: text('run_id')
      .primaryKey()
      .references(() => runs.id, { onDelete: 'cascade' }),
    clusterId: text('cluster_id')
      .notNull()
      .references(() => clusters.id, { onDelete: 'cascade' }),
    planSealed: text('plan_sealed').notNull(),
    /** The state version the plan was made against; approval is refused once the state moved. */
    stateVersion: integer('state_version'),
    destroy: integer('destroy', { mode: 'boolean' }).notNull(),
    summary: text('summary', { mode: 'json' }).$type<{ add: number; change: number; destroy: number }>().notNull(),
    resources: text('resources', { mode: 'json' }).$type<{ address: string; action: string }[]>().notNull(),
    createdAt: integer('created_at').notNull(),
    /** The run that applied it; a plan is applied at most once. */
    appliedBy: text('applied_by'),
  },
  (t) => [index('provision_plans_cluster').on(t.clusterId, t.createdAt)],
);
