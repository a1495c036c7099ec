import type { RunState } from '../../db/schema/index.ts';

export type { RunState };
export const TERMINAL_STATES: readonly RunState[] = ['succeeded', 'failed', 'canceled', 'interrupted'];
export const isTerminal = (s: RunState) => TERMINAL_STATES.includes(s);

export interface Run {
  id: string;
  kind: string;
  tenantId: string | null;
  clusterId: string | null;
  exclusive: boolean;
  lockKey: string | null;
  state: RunState;
  params: Record<string, unknown>;
  result: unknown;
  error: string | null;
  cancelRequested: boolean;
  leaseOwner: string | null;
  leaseExpiresAt: number | null;
  attempt: number;
  createdBy: string | null;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
}

export type EventLevel = 'info' | 'warn' | 'error';

export interface RunEventInput {
  level?: EventLevel;
  type: string;
  message: string;
  data?: Record<string, unknown>;
}

export interface RunEvent extends Required<Omit<RunEventInput, 'data'>> {
  runId: string;
  seq: number;
  at: number;
  data: Record<string, unknown> | null;
}

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
