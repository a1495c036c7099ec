import { isDeepStrictEqual } from 'node:util';
import { diffLines } from 'diff';
import type { ApiClient } from './client.ts';
import type { Cluster, Machine, Tenant } from './api-types.ts';
import { usageError } from './exit.ts';
import { toYaml } from './output.ts';
import { findCluster, findTenant, listMachines } from './resolve.ts';
import type { ClusterDocument, MachineSpec } from './spec.ts';

export type Action = 'create' | 'update' | 'delete' | 'unchanged' | 'kept';

export interface Change {
  action: Action;
  kind: 'tenant' | 'cluster' | 'machine';
  name: string;
  /** the fields that differ (update) */
  fields?: string[];
  before?: Record<string, unknown>;
  after?: Record<string, unknown>;
}

export interface ReconcilePlan {
  doc: ClusterDocument;
  tenant?: Tenant;
  cluster?: Cluster;
  machines: Machine[];
  changes: Change[];
  warnings: string[];
  prune: boolean;
}

type Fields = Record<string, unknown>;

function clusterFields(c: Cluster): Fields {
  const s = c.settings;
  return {
    endpoint: c.endpoint,
    kubernetesVersion: c.kubernetesVersion,
    schematic: s.schematic,
    installerImage: s.installerImage ?? null,
    installDisk: s.installDisk,
    podSubnets: s.podSubnets,
    serviceSubnets: s.serviceSubnets,
    patches: s.patches ?? [],
    providerSettings: s.providerSettings ?? {},
  };
}

/**
 * What the file asks for. Settings the server has a default for keep their current value when the
 * file leaves them out; patches and provider settings are the file's (left out means none).
 */
function desiredClusterFields(spec: ClusterDocument['spec'], current: Fields): Fields {
  const keep = <K extends string>(k: K, v: unknown) => (v === undefined ? current[k] : v);
  return {
    endpoint: spec.endpoint,
    kubernetesVersion: keep('kubernetesVersion', spec.kubernetesVersion),
    schematic: keep('schematic', spec.schematic),
    installerImage: keep('installerImage', spec.installerImage),
    installDisk: keep('installDisk', spec.installDisk),
    podSubnets: keep('podSubnets', spec.podSubnets),
    serviceSubnets: keep('serviceSubnets', spec.serviceSubnets),
    patches: spec.patches ?? [],
    providerSettings: spec.providerSettings ?? {},
  };
}

const machineFields = (m: Machine): Fields => ({ address: m.address, installDisk: m.installDisk, patches: m.patches });
const desiredMachineFields = (m: MachineSpec): Fields => ({ address: m.address ?? null, installDisk: m.installDisk ?? null, patches: m.patches ?? [] });

function changedKeys(before: Fields, after: Fields): string[] {
  return Object.keys(after).filter((k) => !isDeepStrictEqual(before[k], after[k]));
}
const pick = (o: Fields, keys: string[]) => Object.fromEntries(keys.map((k) => [k, o[k]]));

function machineCreateBody(m: MachineSpec): Fields {
  return {
    name: m.name,
    role: m.role,
    provider: m.provider,
    ...(m.address ? { address: m.address } : {}),
    ...(m.installDisk ? { installDisk: m.installDisk } : {}),
    ...(m.patches?.length ? { patches: m.patches } : {}),
  };
}

function clusterCreateBody(doc: ClusterDocument, tenantId: string): Fields {
  const { machines: _machines, installerImage, ...settings } = doc.spec;
  return { tenant: tenantId, name: doc.metadata.name, ...settings, ...(installerImage ? { installerImage } : {}) };
}

/** Compares the file with the API's objects; changes nothing. */
export async function planReconcile(api: ApiClient, doc: ClusterDocument, opts: { prune: boolean }): Promise<ReconcilePlan> {
  const plan: ReconcilePlan = { doc, machines: [], changes: [], warnings: [], prune: opts.prune };
  const clusterName = doc.metadata.name;
  plan.tenant = await findTenant(api, doc.metadata.tenant);
  if (!plan.tenant) plan.changes.push({ action: 'create', kind: 'tenant', name: doc.metadata.tenant, after: { name: doc.metadata.tenant } });
  plan.cluster = plan.tenant ? await findCluster(api, clusterName, plan.tenant.id) : undefined;

  if (!plan.cluster) {
    const { tenant: _t, ...after } = clusterCreateBody(doc, '');
    plan.changes.push({ action: 'create', kind: 'cluster', name: clusterName, after });
    for (const m of doc.spec.machines) plan.changes.push({ action: 'create', kind: 'machine', name: m.name, after: machineCreateBody(m) });
    return plan;
  }

  const before = clusterFields(plan.cluster);
  const after = desiredClusterFields(doc.spec, before);
  const fields = changedKeys(before, after);
  plan.changes.push(
    fields.length
      ? { action: 'update', kind: 'cluster', name: clusterName, fields, before: pick(before, fields), after: pick(after, fields) }
      : { action: 'unchanged', kind: 'cluster', name: clusterName },
  );
  if (doc.spec.talosVersion && doc.spec.talosVersion !== plan.cluster.talosVersion) {
    plan.warnings.push(`cluster ${clusterName} runs Talos ${plan.cluster.talosVersion}, the file says ${doc.spec.talosVersion}: the Talos version changes only through \`rezus upgrade\``);
  }

  plan.machines = await listMachines(api, plan.cluster.id);
  const byName = new Map(plan.machines.map((m) => [m.name, m]));
  const immutable: string[] = [];
  for (const want of doc.spec.machines) {
    const have = byName.get(want.name);
    if (!have) {
      plan.changes.push({ action: 'create', kind: 'machine', name: want.name, after: machineCreateBody(want) });
      continue;
    }
    for (const k of ['role', 'provider'] as const) {
      if (have[k] !== want[k]) immutable.push(`machine ${want.name}: ${k} is ${have[k]}, the file says ${want[k]}`);
    }
    const b = machineFields(have);
    const a = desiredMachineFields(want);
    const changed = changedKeys(b, a);
    plan.changes.push(
      changed.length
        ? { action: 'update', kind: 'machine', name: want.name, fields: changed, before: pick(b, changed), after: pick(a, changed) }
        : { action: 'unchanged', kind: 'machine', name: want.name },
    );
  }
  if (immutable.length) throw usageError(`${immutable.join('; ')}. A machine's role and provider do not change: delete it (or rename it in the file and --prune) and add it again`);
  const wanted = new Set(doc.spec.machines.map((m) => m.name));
  for (const m of plan.machines) {
    if (wanted.has(m.name)) continue;
    plan.changes.push({ action: opts.prune ? 'delete' : 'kept', kind: 'machine', name: m.name, before: { role: m.role, provider: m.provider } });
  }
  return plan;
}

export const pendingChanges = (plan: ReconcilePlan) => plan.changes.filter((c) => c.action === 'create' || c.action === 'update' || c.action === 'delete');

/** Makes the API match the file: tenant, cluster, then machines (deletions first, so a renamed machine's address is free). */
export async function executeReconcile(api: ApiClient, plan: ReconcilePlan): Promise<Cluster> {
  const { doc } = plan;
  const tenant = plan.tenant ?? (await api.json<Tenant>('POST', '/v1/tenants', { body: { name: doc.metadata.tenant } }));
  if (!plan.cluster) {
    const cluster = await api.json<Cluster>('POST', '/v1/clusters', { body: clusterCreateBody(doc, tenant.id) });
    for (const m of doc.spec.machines) await api.json('POST', `/v1/clusters/${cluster.id}/machines`, { body: machineCreateBody(m) });
    return cluster;
  }
  const cluster = plan.cluster;
  const byName = new Map(plan.machines.map((m) => [m.name, m]));
  for (const c of plan.changes.filter((x) => x.kind === 'machine' && x.action === 'delete')) {
    await api.raw('DELETE', `/v1/clusters/${cluster.id}/machines/${byName.get(c.name)!.id}`);
  }
  const clusterChange = plan.changes.find((c) => c.kind === 'cluster' && c.action === 'update');
  const updated = clusterChange ? await api.json<Cluster>('PATCH', `/v1/clusters/${cluster.id}`, { body: clusterChange.after }) : cluster;
  const specs = new Map(doc.spec.machines.map((m) => [m.name, m]));
  for (const c of plan.changes.filter((x) => x.kind === 'machine')) {
    if (c.action === 'create') await api.json('POST', `/v1/clusters/${cluster.id}/machines`, { body: machineCreateBody(specs.get(c.name)!) });
    if (c.action === 'update') await api.json('PATCH', `/v1/clusters/${cluster.id}/machines/${byName.get(c.name)!.id}`, { body: c.after });
  }
  return updated;
}

const SIGN: Record<Action, string> = { create: '+', update: '~', delete: '-', unchanged: '=', kept: '!' };

/** The human diff: one header per object, then its changed fields as a line diff of their YAML. */
export function renderPlan(plan: ReconcilePlan): string {
  const out: string[] = [];
  const indent = (prefix: string, text: string) =>
    text
      .replace(/\n$/, '')
      .split('\n')
      .map((l) => `${prefix}   ${l}`);
  for (const c of plan.changes) {
    if (c.action === 'unchanged') continue;
    const label = `${c.kind} ${c.kind === 'machine' ? `${plan.doc.metadata.name}/` : ''}${c.name}`;
    if (c.action === 'kept') {
      out.push(`${SIGN.kept} ${label}: not in the file, kept (--prune deletes it)`);
      continue;
    }
    out.push(`${SIGN[c.action]} ${label}${c.action === 'delete' ? '' : c.action === 'create' ? ' (new)' : ''}`);
    if (c.action === 'create' && c.after) {
      const shown = Object.fromEntries(Object.entries(c.after).filter(([, v]) => v !== undefined));
      out.push(...indent('+', toYaml(shown)));
    }
    if (c.action === 'update') {
      for (const part of diffLines(toYaml(c.before), toYaml(c.after))) {
        out.push(...indent(part.added ? '+' : part.removed ? '-' : ' ', part.value));
      }
    }
  }
  for (const w of plan.warnings) out.push(`warning: ${w}`);
  return out.length ? `${out.join('\n')}\n` : '';
}

export function summarize(plan: ReconcilePlan): Record<Action, number> {
  const n: Record<Action, number> = { create: 0, update: 0, delete: 0, unchanged: 0, kept: 0 };
  for (const c of plan.changes) n[c.action]++;
  return n;
}
