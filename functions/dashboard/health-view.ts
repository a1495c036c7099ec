import { z } from 'zod';
import type { Deps, Principal } from '../deps.ts';

export type HealthStatus = 'healthy' | 'degraded' | 'unhealthy' | 'unknown';

export interface ClusterHealth {
  status: HealthStatus;
  /** One line for people, e.g. "2 of 3 nodes ready". */
  summary?: string;
  /** When the data was collected (epoch ms). */
  checkedAt?: number;
}

export interface MachineHealth {
  status: HealthStatus;
  /** When the node last answered (epoch ms). */
  lastSeen?: number;
  /** Recent samples, oldest first, drawn as a sparkline. */
  samples?: number[];
  /** What the samples measure, e.g. "CPU load (1 min)". */
  samplesLabel?: string;
}

export interface ClusterHealthReport {
  cluster: ClusterHealth;
  /** By machine id; a machine missing here has unknown health. */
  machines: Record<string, MachineHealth>;
}

export interface HealthContext {
  deps: Deps;
  /** Who is looking; a view must not report on clusters this principal cannot see. */
  principal: Principal;
  /** GET through the API as this principal, e.g. `/v1/clusters/:id/health`. */
  get(path: string): Promise<{ status: number; body: unknown }>;
}

/**
 * Where the dashboard gets node and cluster health. The collect feature provides the real one;
 * until then every cluster reads as unknown.
 */
export interface HealthView {
  report(ctx: HealthContext, clusterId: string): Promise<ClusterHealthReport>;
}

export const UNKNOWN_REPORT: ClusterHealthReport = Object.freeze({ cluster: Object.freeze({ status: 'unknown' as const }), machines: Object.freeze({}) });

export const unknownHealthView: HealthView = { report: async () => UNKNOWN_REPORT };

const status = z.enum(['healthy', 'degraded', 'unhealthy', 'unknown']).catch('unknown');
const epochMs = z.number().int().nonnegative();
const reportSchema = z.object({
  status,
  summary: z.string().max(500).optional().catch(undefined),
  checkedAt: epochMs.optional().catch(undefined),
  machines: z
    .array(
      z.object({
        id: z.string(),
        status: status.optional(),
        lastSeen: epochMs.optional().catch(undefined),
        samples: z.array(z.number()).max(10_000).optional().catch(undefined),
        samplesLabel: z.string().max(100).optional().catch(undefined),
      }),
    )
    .optional()
    .catch(undefined),
});

/** Reads a health document defensively: anything it does not understand is unknown, never an error. */
export function parseHealthReport(body: unknown): ClusterHealthReport {
  const res = reportSchema.safeParse(body);
  if (!res.success) return UNKNOWN_REPORT;
  const { machines = [], ...cluster } = res.data;
  return {
    cluster: dropUndefined(cluster),
    machines: Object.fromEntries(machines.map(({ id, ...m }) => [id, dropUndefined({ status: 'unknown', ...m })])),
  };
}

function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/**
 * Reads `GET /v1/clusters/:id/health` through the API. That route comes with the collect feature;
 * while it is absent (404) or answers something unexpected the report is unknown.
 */
export const apiHealthView: HealthView = {
  async report(ctx, clusterId) {
    const res = await ctx.get(`/v1/clusters/${encodeURIComponent(clusterId)}/health`);
    return res.status === 200 ? parseHealthReport(res.body) : UNKNOWN_REPORT;
  },
};

/** A failing view never breaks a page. */
export async function readHealth(view: HealthView, ctx: HealthContext, clusterId: string): Promise<ClusterHealthReport> {
  try {
    return await view.report(ctx, clusterId);
  } catch (err) {
    ctx.deps.log.warn('health view failed', { cluster: clusterId, error: err instanceof Error ? err.message : String(err) });
    return UNKNOWN_REPORT;
  }
}
