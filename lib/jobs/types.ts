import type { RunState, runEvents, runs } from '../../db/schema/index.ts';

export type { RunState };
export const TERMINAL_STATES: readonly RunState[] = ['succeeded', 'failed', 'canceled', 'interrupted'];
export const isTerminal = (s: RunState) => TERMINAL_STATES.includes(s);

/** A run as stored: the type comes from the schema, so a new column reaches every reader. */
export type Run = typeof runs.$inferSelect;

export type EventLevel = 'info' | 'warn' | 'error';

export interface RunEventInput {
  level?: EventLevel;
  type: string;
  message: string;
  data?: Record<string, unknown>;
}

export type RunEvent = typeof runEvents.$inferSelect;

export interface EnqueueInput {
  kind: string;
  tenantId?: string | null;
  clusterId?: string | null;
  /** At most one exclusive run per lock key is queued or running. */
  exclusive: boolean;
  /** Defaults to the cluster id: cluster-changing runs exclude each other per cluster. */
  lockKey?: string;
  params?: Record<string, unknown>;
  createdBy?: string | null;
}
