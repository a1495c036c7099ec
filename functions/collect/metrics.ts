// What the latest collect pass knows, as metric families: one-hot health states per cluster and
// machine, etcd membership, and the latest value of every node sample. Portable: the runner turns
// these into prom-client metrics (runner/metrics.ts).
import { eq } from 'drizzle-orm';
import { clusterHealth, clusters, HEALTH_STATES, machineHealth, machines, tenants } from '../../db/schema/index.ts';
import type { Deps } from '../context.ts';

export interface MetricFamily {
  name: string;
  help: string;
  /** A node's running totals (`*_total`) only grow: counters; everything else is a gauge. */
  type: 'gauge' | 'counter';
  labelNames: string[];
  samples: Array<{ labels: Record<string, string>; value: number }>;
}

/** `memory.used_bytes` → `rezus_node_memory_used_bytes`. */
export const nodeMetricName = (metric: string): string => `rezus_node_${metric.replace(/[^a-zA-Z0-9_]/g, '_')}`;

export async function healthFamilies(deps: Pick<Deps, 'db'>): Promise<MetricFamily[]> {
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
  const families: MetricFamily[] = [];
  const gauge = (name: string, help: string, labelNames: string[], samples: MetricFamily['samples']) => {
    if (samples.length) families.push({ name, help, type: 'gauge', labelNames, samples });
  };
  gauge(
    'rezus_cluster_health',
    'Cluster health from the latest collect pass (1 for the current state).',
    ['tenant', 'cluster', 'state'],
    cl.flatMap((r) => HEALTH_STATES.map((s) => ({ labels: { tenant: r.tenant, cluster: r.cluster, state: s }, value: r.h.state === s ? 1 : 0 }))),
  );
  gauge(
    'rezus_cluster_last_collect_timestamp_seconds',
    'When the latest collect pass assessed the cluster.',
    ['tenant', 'cluster'],
    cl.map((r) => ({ labels: { tenant: r.tenant, cluster: r.cluster }, value: r.h.checkedAt / 1000 })),
  );
  const withEtcd = cl.filter((r) => r.h.etcd);
  gauge(
    'rezus_cluster_etcd_members',
    'Voting etcd members the control planes report.',
    ['tenant', 'cluster'],
    withEtcd.filter((r) => r.h.etcd!.members !== null).map((r) => ({ labels: { tenant: r.tenant, cluster: r.cluster }, value: r.h.etcd!.members! })),
  );
  gauge(
    'rezus_cluster_etcd_healthy_members',
    'etcd members whose service and status are healthy.',
    ['tenant', 'cluster'],
    withEtcd.map((r) => ({ labels: { tenant: r.tenant, cluster: r.cluster }, value: r.h.etcd!.healthy })),
  );
  gauge(
    'rezus_machine_health',
    'Machine health from the latest collect pass (1 for the current state).',
    ['tenant', 'cluster', 'machine', 'role', 'state'],
    ms.flatMap((r) => HEALTH_STATES.map((s) => ({ labels: { tenant: r.tenant, cluster: r.cluster, machine: r.machine, role: r.role, state: s }, value: r.h.state === s ? 1 : 0 }))),
  );
  const byMetric = new Map<string, MetricFamily>();
  for (const r of ms) {
    for (const [metric, value] of Object.entries(r.h.latest ?? {})) {
      if (!Number.isFinite(value)) continue;
      const name = nodeMetricName(metric);
      const family = byMetric.get(name) ?? {
        name,
        help: `Latest collected node sample ${metric}.`,
        type: name.endsWith('_total') ? 'counter' : 'gauge',
        labelNames: ['tenant', 'cluster', 'machine'],
        samples: [],
      };
      family.samples.push({ labels: { tenant: r.tenant, cluster: r.cluster, machine: r.machine }, value });
      byMetric.set(name, family);
    }
  }
  families.push(...[...byMetric.values()].sort((a, b) => a.name.localeCompare(b.name)));
  return families;
}
