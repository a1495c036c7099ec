import type { Command } from 'commander';
import type { Cluster, Machine, Run, Tenant } from '../api-types.ts';
import type { ApiClient } from '../client.ts';
import { usageError } from '../exit.ts';
import { age, printData, renderTable, time, type Column } from '../output.ts';
import { listClusters, listMachines, listTenants, resolveCluster, resolveMachine, resolveTenant } from '../resolve.ts';
import { session } from '../session.ts';

export const KINDS = ['tenants', 'clusters', 'machines', 'runs'] as const;
type Kind = (typeof KINDS)[number];
const ALIASES: Record<string, Kind> = {
  tenant: 'tenants', tenants: 'tenants', tn: 'tenants',
  cluster: 'clusters', clusters: 'clusters', cl: 'clusters',
  machine: 'machines', machines: 'machines', m: 'machines',
  run: 'runs', runs: 'runs',
};
export const KIND_WORDS = Object.keys(ALIASES);

function kindOf(word: string): Kind {
  const k = ALIASES[word];
  if (!k) throw usageError(`unknown kind "${word}": use ${KINDS.join(', ')}`);
  return k;
}

interface KindOptions {
  cluster?: string;
  limit?: string;
}

function requireCluster(opts: KindOptions, kind: string): string {
  if (!opts.cluster) throw usageError(`${kind} belong to a cluster: add --cluster <name>`);
  return opts.cluster;
}

const duration = (r: Run) => (r.startedAt && r.finishedAt ? `${((r.finishedAt - r.startedAt) / 1000).toFixed(1)}s` : '-');

async function clusterNames(api: ApiClient): Promise<Map<string, string>> {
  return new Map((await listClusters(api)).map((c) => [c.id, c.name]));
}

const tenantColumns: Column<Tenant>[] = [
  { header: 'name', value: (t) => t.name },
  { header: 'id', value: (t) => t.id },
  { header: 'age', value: (t) => age(t.createdAt) },
];
const clusterColumns = (tenants: Map<string, string>): Column<Cluster>[] => [
  { header: 'name', value: (c) => c.name },
  { header: 'tenant', value: (c) => tenants.get(c.tenant) ?? c.tenant },
  { header: 'endpoint', value: (c) => c.endpoint },
  { header: 'talos', value: (c) => c.talosVersion },
  { header: 'kubernetes', value: (c) => c.kubernetesVersion },
  { header: 'bootstrapped', value: (c) => (c.bootstrapped ? 'yes' : 'no') },
  { header: 'age', value: (c) => age(c.createdAt) },
];
export const machineColumns: Column<Machine>[] = [
  { header: 'name', value: (m) => m.name },
  { header: 'role', value: (m) => m.role },
  { header: 'provider', value: (m) => m.provider },
  { header: 'state', value: (m) => m.state },
  { header: 'address', value: (m) => m.address },
  { header: 'ipv4', value: (m) => m.ipv4 },
  { header: 'ipv6', value: (m) => m.ipv6 },
  { header: 'talos', value: (m) => m.talosVersion },
];
export const runColumns = (clusters: Map<string, string>): Column<Run>[] => [
  { header: 'id', value: (r) => r.id },
  { header: 'kind', value: (r) => r.kind },
  { header: 'cluster', value: (r) => (r.cluster ? (clusters.get(r.cluster) ?? r.cluster) : '-') },
  { header: 'state', value: (r) => r.state },
  { header: 'age', value: (r) => age(r.createdAt) },
  { header: 'duration', value: (r) => duration(r) },
];

async function getAction(api: ApiClient, format: 'table' | 'json' | 'yaml', kind: Kind, name: string | undefined, opts: KindOptions, tenantRef?: string) {
  const out = (rows: unknown, table: () => string) => (format === 'table' ? process.stdout.write(table()) : printData(format, rows));
  switch (kind) {
    case 'tenants': {
      const rows = name ? [await resolveTenant(api, name)] : await listTenants(api);
      return out(name ? rows[0] : { tenants: rows }, () => renderTable(rows, tenantColumns));
    }
    case 'clusters': {
      const tenants = new Map((await listTenants(api)).map((t) => [t.id, t.name]));
      if (name) {
        const cluster = await resolveCluster(api, name, tenantRef);
        if (format === 'table') return process.stdout.write(renderTable([cluster], clusterColumns(tenants)));
        // One cluster as data is its spec, so `get cluster X -o yaml > x.yaml; apply -f x.yaml` round-trips.
        const tenant = await resolveTenant(api, cluster.tenant);
        const { exportSpec } = await import('../spec.ts');
        return printData(format, exportSpec(tenant, cluster, await listMachines(api, cluster.id)));
      }
      const tenantId = tenantRef ? (await resolveTenant(api, tenantRef)).id : undefined;
      const rows = await listClusters(api, tenantId);
      return out({ clusters: rows }, () => renderTable(rows, clusterColumns(tenants)));
    }
    case 'machines': {
      const cluster = await resolveCluster(api, requireCluster(opts, 'machines'), tenantRef);
      const rows = name ? [await resolveMachine(api, cluster, name)] : await listMachines(api, cluster.id);
      return out(name ? rows[0] : { machines: rows }, () => renderTable(rows, machineColumns));
    }
    case 'runs': {
      if (name) {
        const run = await api.json<Run>('GET', `/v1/runs/${name}`);
        const names = format === 'table' ? await clusterNames(api) : new Map<string, string>();
        return out(run, () => renderTable([run], runColumns(names)));
      }
      const cluster = opts.cluster ? await resolveCluster(api, opts.cluster, tenantRef) : undefined;
      const runs = (await api.json<{ runs: Run[] }>('GET', '/v1/runs', { query: { cluster: cluster?.id, limit: opts.limit } })).runs;
      const names = format === 'table' ? await clusterNames(api) : new Map<string, string>();
      return out({ runs }, () => renderTable(runs, runColumns(names)));
    }
  }
}

function kv(rows: [string, unknown][]): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${`${k}:`.padEnd(width + 2)}${v === null || v === undefined || v === '' ? '-' : String(v)}`).join('\n') + '\n';
}

async function describeAction(api: ApiClient, format: 'table' | 'json' | 'yaml', kind: Kind, name: string, opts: KindOptions, tenantRef?: string) {
  const w = (s: string) => process.stdout.write(s);
  switch (kind) {
    case 'tenants': {
      const tenant = await resolveTenant(api, name);
      const clusters = await listClusters(api, tenant.id);
      if (format !== 'table') return printData(format, { tenant, clusters });
      w(kv([['Name', tenant.name], ['ID', tenant.id], ['Created', time(tenant.createdAt)]]));
      w(`\nClusters:\n${renderTable(clusters, clusterColumns(new Map([[tenant.id, tenant.name]])))}`);
      return;
    }
    case 'clusters': {
      const cluster = await resolveCluster(api, name, tenantRef);
      const [tenant, machines, runs, health] = await Promise.all([
        resolveTenant(api, cluster.tenant),
        listMachines(api, cluster.id),
        api.json<{ runs: Run[] }>('GET', '/v1/runs', { query: { cluster: cluster.id, limit: 5 } }).then((r) => r.runs),
        api.json<{ state?: string; reasons?: string[] }>('GET', `/v1/clusters/${cluster.id}/health`).catch(() => undefined),
      ]);
      if (format !== 'table') return printData(format, { cluster, machines, runs, health });
      const s = cluster.settings;
      w(
        kv([
          ['Name', cluster.name], ['ID', cluster.id], ['Tenant', tenant.name], ['Endpoint', cluster.endpoint],
          ['Talos', cluster.talosVersion], ['Kubernetes', cluster.kubernetesVersion],
          ['Bootstrapped', cluster.bootstrapped ? time(cluster.bootstrappedAt) : 'no'],
          ['Health', health?.state ? `${health.state}${health.reasons?.length ? ` (${health.reasons.join('; ')})` : ''}` : '-'],
          ['Install disk', s.installDisk], ['Installer image', s.installerImage ?? `schematic ${s.schematic ?? '-'}`],
          ['Pod subnets', s.podSubnets?.join(', ')], ['Service subnets', s.serviceSubnets?.join(', ')],
          ['Patches', String(s.patches?.length ?? 0)],
          ['Providers', Object.keys(s.providerSettings ?? {}).join(', ')],
          ['Created', time(cluster.createdAt)], ['Updated', time(cluster.updatedAt)],
        ]),
      );
      w(`\nMachines:\n${renderTable(machines, machineColumns)}`);
      w(`\nRecent runs:\n${renderTable(runs, runColumns(new Map([[cluster.id, cluster.name]])))}`);
      return;
    }
    case 'machines': {
      const cluster = await resolveCluster(api, requireCluster(opts, 'machines'), tenantRef);
      const m = await resolveMachine(api, cluster, name);
      if (format !== 'table') return printData(format, m);
      w(
        kv([
          ['Name', m.name], ['ID', m.id], ['Cluster', cluster.name], ['Role', m.role], ['Provider', m.provider], ['State', m.state],
          ['Address', m.address], ['IPv4', m.ipv4], ['IPv6', m.ipv6], ['Install disk', m.installDisk ?? `${cluster.settings.installDisk ?? '-'} (cluster)`],
          ['Talos', m.talosVersion], ['Patches', String(m.patches.length)], ['Created', time(m.createdAt)], ['Updated', time(m.updatedAt)],
        ]),
      );
      return;
    }
    case 'runs': {
      const run = await api.json<Run>('GET', `/v1/runs/${name}`);
      if (format !== 'table') return printData(format, run);
      const cluster = run.cluster ? (await clusterNames(api)).get(run.cluster) : undefined;
      w(
        kv([
          ['ID', run.id], ['Kind', run.kind], ['State', run.state], ['Cluster', cluster ?? run.cluster], ['Attempt', run.attempt],
          ['Created', time(run.createdAt)], ['Started', time(run.startedAt)], ['Finished', time(run.finishedAt)],
          ['Duration', duration(run)], ['Error', run.error],
        ]),
      );
      if (run.params && Object.keys(run.params).length) w(`\nParams:\n${JSON.stringify(run.params, null, 2)}\n`);
      if (run.result) w(`\nResult:\n${JSON.stringify(run.result, null, 2)}\n`);
      w(`\nLog: rezus logs ${run.id}\n`);
      return;
    }
  }
}

export function registerGet(program: Command): void {
  program
    .command('get')
    .description('list tenants, clusters, machines or runs, or show one; `get cluster NAME -o yaml` prints its spec for `apply -f`')
    .argument('<kind>', `one of ${KINDS.join(', ')} (singular works too)`)
    .argument('[name]', 'a name or id: show just that one')
    .option('-c, --cluster <cluster>', 'the cluster machines (or runs) belong to')
    .option('--limit <n>', 'at most this many runs')
    .action(async (kindWord: string, name: string | undefined, opts: KindOptions, cmd: Command) => {
      const kind = kindOf(kindWord);
      const { api, format, opts: g } = await session(cmd);
      await getAction(api, format, kind, name, opts, g.tenant);
    });
  program
    .command('describe')
    .description('show one tenant, cluster, machine or run in detail (with its machines, recent runs, health)')
    .argument('<kind>', `one of ${KINDS.join(', ')}`)
    .argument('<name>', 'a name or id')
    .option('-c, --cluster <cluster>', 'the cluster a machine belongs to')
    .action(async (kindWord: string, name: string, opts: KindOptions, cmd: Command) => {
      const kind = kindOf(kindWord);
      const { api, format, opts: g } = await session(cmd);
      await describeAction(api, format, kind, name, opts, g.tenant);
    });
}
