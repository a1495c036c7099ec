import { z } from 'zod';
import { errorMessage } from '../../lib/errors.ts';
import type { Deps, Principal } from '../context.ts';

export type HealthStatus = 'healthy' | 'degraded' | 'unreachable' | 'unknown';

export interface ClusterHealth {
  status: HealthStatus;
  /** One line for people, e.g. "2 of 3 nodes ready". */
  summary?: string;
  /** Every reason, each cut to its first sentence-sized line. */
  reasons?: string[];
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
  /** Memory in use (bytes), oldest first: the second sparkline. */
  memory?: number[];
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

const status = z.enum(['healthy', 'degraded', 'unreachable', 'unknown']).catch('unknown');
const epochMs = z.number().int().nonnegative();
const reportSchema = z.object({
  state: status,
  reasons: z.array(z.string().max(500)).max(100).optional().catch(undefined),
  checkedAt: epochMs.nullable().optional().catch(undefined),
  machines: z
    .array(
      z.object({
        id: z.string(),
        state: status.optional(),
        lastSeenAt: epochMs.nullable().optional().catch(undefined),
      }),
    )
    .optional()
    .catch(undefined),
});

/**
 * Reads the body of `GET /v1/clusters/:id/health` defensively: anything it does not understand is
 * unknown, never an error.
 */
export function parseHealthReport(body: unknown): ClusterHealthReport {
  const res = reportSchema.safeParse(body);
  if (!res.success) return UNKNOWN_REPORT;
  const { machines = [], state, reasons, checkedAt } = res.data;
  return {
    cluster: dropUndefined({
      status: state,
      summary: reasons?.length ? shortReason(reasons[0]!) + (reasons.length > 1 ? ` (+${reasons.length - 1} more)` : '') : undefined,
      reasons: reasons?.length ? reasons.map(shortReason) : undefined,
      checkedAt: checkedAt ?? undefined,
    }),
    machines: Object.fromEntries(machines.map((m) => [m.id, dropUndefined({ status: m.state ?? 'unknown', lastSeen: m.lastSeenAt ?? undefined })])),
  };
}

const REASON_MAX = 140;

/**
 * Node errors arrive as whatever a gRPC or TLS library printed, sometimes with a multi-line
 * "Resolution note:" appended; people get the first line, without the library's boilerplate.
 */
export function shortReason(reason: string): string {
  let text = reason.split(/\r?\n/)[0]!.replace(/\s*Resolution note:.*$/is, '').replace(/\s+/g, ' ').trim();
  text = text.replace(/^(\S+: )(?:rpc error: code = \w+ desc = )/, '$1');
  return text.length > REASON_MAX ? `${text.slice(0, REASON_MAX - 1).trimEnd()}…` : text;
}

function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

const SPARK_WINDOW_MS = 6 * 3_600_000;

/** The collected health, read through the same API a user would call, with a CPU and a memory trend per machine. */
export const apiHealthView: HealthView = {
  async report(ctx, clusterId) {
    const cid = encodeURIComponent(clusterId);
    const res = await ctx.get(`/v1/clusters/${cid}/health`);
    if (res.status !== 200) return UNKNOWN_REPORT;
    const report = parseHealthReport(res.body);
    const since = ctx.deps.clock.now() - SPARK_WINDOW_MS;
    const series = async (mid: string, metric: string) => {
      const r = await ctx.get(`/v1/clusters/${cid}/machines/${encodeURIComponent(mid)}/samples?metric=${metric}&since=${since}`);
      const points = (r.body as { points?: { value?: number; avg?: number }[] } | null)?.points;
      return r.status === 200 && Array.isArray(points) ? points.map((p) => Number(p.value ?? p.avg)).filter(Number.isFinite) : [];
    };
    await Promise.all(
      Object.entries(report.machines).map(async ([mid, mh]) => {
        const [cpu, load, memory] = await Promise.all([series(mid, 'cpu.utilization'), series(mid, 'load.1'), series(mid, 'memory.used_bytes')]);
        Object.assign(mh, cpu.length ? { samples: cpu, samplesLabel: 'CPU' } : { samples: load, samplesLabel: 'load' }, { memory });
      }),
    );
    return report;
  },
};

/** A failing view never breaks a page. */
export async function readHealth(view: HealthView, ctx: HealthContext, clusterId: string): Promise<ClusterHealthReport> {
  try {
    return await view.report(ctx, clusterId);
  } catch (err) {
    ctx.deps.log.warn('health view failed', { cluster: clusterId, error: errorMessage(err) });
    return UNKNOWN_REPORT;
  }
}
