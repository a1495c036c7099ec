// /metrics gauges from the latest collect pass: one-hot health states per cluster and machine,
// etcd membership, and the latest value of every node sample.
import { eq } from 'drizzle-orm';
import { clusterHealth, clusters, HEALTH_STATES, machineHealth, machines, tenants } from '../../db/schema/index.ts';
import { escapeLabel } from '../ops/http-metrics.ts';
import type { MetricsSource } from '../ops/routes.ts';

const labels = (l: Record<string, string>): string =>
  `{${Object.entries(l)
    .map(([k, v]) => `${k}="${escapeLabel(v)}"`)
    .join(',')}}`;

/** `memory.used_bytes` → `rezus_node_memory_used_bytes`. */
export const nodeMetricName = (metric: string): string => `rezus_node_${metric.replace(/[^a-zA-Z0-9_]/g, '_')}`;

export const collectMetrics: MetricsSource = async (deps) => {
  const [cl, ms] = await Promise.all([
    deps.db
      .select({ cluster: clusters.name, tenant: tenants.name, h: clusterHealth })
      .from(clusterHealth)
      .innerJoin(clusters, eq(clusters.id, clusterHealth.clusterId))
      .innerJoin(tenants, eq(tenants.id, clusters.tenantId)),
    deps.db
      .select({ machine: machines.name, role: machines.role, cluster: clusters.name, tenant: tenants.name, h: machineHealth })
      .from(machineHealth)
      .innerJoin(machines, eq(machines.id, machineHealth.machineId))
      .innerJoin(clusters, eq(clusters.id, machines.clusterId))
      .innerJoin(tenants, eq(tenants.id, clusters.tenantId)),
  ]);
  const out: string[] = [];
  const family = (name: string, help: string, lines: string[]): void => {
    if (lines.length === 0) return;
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, ...lines);
  };

  family(
    'rezus_cluster_health',
    'Cluster health from the latest collect pass (1 for the current state).',
    cl.flatMap((r) => HEALTH_STATES.map((s) => `rezus_cluster_health${labels({ tenant: r.tenant, cluster: r.cluster, state: s })} ${r.h.state === s ? 1 : 0}`)),
  );
  family(
    'rezus_cluster_last_collect_timestamp_seconds',
    'When the latest collect pass assessed the cluster.',
    cl.map((r) => `rezus_cluster_last_collect_timestamp_seconds${labels({ tenant: r.tenant, cluster: r.cluster })} ${r.h.checkedAt / 1000}`),
  );
  const withEtcd = cl.filter((r) => r.h.etcd);
  family(
    'rezus_cluster_etcd_members',
    'Voting etcd members the control planes report.',
    withEtcd.filter((r) => r.h.etcd!.members !== null).map((r) => `rezus_cluster_etcd_members${labels({ tenant: r.tenant, cluster: r.cluster })} ${r.h.etcd!.members}`),
  );
  family(
    'rezus_cluster_etcd_healthy_members',
    'etcd members whose service and status are healthy.',
    withEtcd.map((r) => `rezus_cluster_etcd_healthy_members${labels({ tenant: r.tenant, cluster: r.cluster })} ${r.h.etcd!.healthy}`),
  );
  family(
    'rezus_machine_health',
    'Machine health from the latest collect pass (1 for the current state).',
    ms.flatMap((r) =>
      HEALTH_STATES.map((s) => `rezus_machine_health${labels({ tenant: r.tenant, cluster: r.cluster, machine: r.machine, role: r.role, state: s })} ${r.h.state === s ? 1 : 0}`),
    ),
  );
  const byMetric = new Map<string, string[]>();
  for (const r of ms) {
    for (const [metric, value] of Object.entries(r.h.latest ?? {})) {
      if (!Number.isFinite(value)) continue;
      const name = nodeMetricName(metric);
      const lines = byMetric.get(name) ?? [];
      lines.push(`${name}${labels({ tenant: r.tenant, cluster: r.cluster, machine: r.machine })} ${value}`);
      byMetric.set(name, lines);
    }
  }
  for (const [name, lines] of [...byMetric].sort(([a], [b]) => a.localeCompare(b))) family(name, 'Latest collected node sample.', lines);
  return out.join('\n');
};
