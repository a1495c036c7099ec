import type { ApiClient } from './client.ts';
import { ApiFailure } from './client.ts';
import type { Cluster, Machine, Tenant } from './api-types.ts';
import { usageError } from './exit.ts';

// The API addresses objects by id; people use names. Ids have a fixed shape, so an argument that
// looks like one is used as is and anything else is looked up by name.
const ID = /^[a-z]+_[a-z2-7]{16}$/;
export const looksLikeId = (v: string, prefix: string) => ID.test(v) && v.startsWith(`${prefix}_`);

const notFound = (what: string, name: string) => new ApiFailure(404, 'not_found', `${what} "${name}" not found`);

export async function listTenants(api: ApiClient): Promise<Tenant[]> {
  return (await api.json<{ tenants: Tenant[] }>('GET', '/v1/tenants')).tenants;
}

export async function findTenant(api: ApiClient, ref: string): Promise<Tenant | undefined> {
  if (looksLikeId(ref, 'tn')) {
    try {
      return await api.json<Tenant>('GET', `/v1/tenants/${ref}`);
    } catch (err) {
      if (err instanceof ApiFailure && err.status === 404) return undefined;
      throw err;
    }
  }
  return (await listTenants(api)).find((t) => t.name === ref);
}

export async function resolveTenant(api: ApiClient, ref: string): Promise<Tenant> {
  const t = await findTenant(api, ref);
  if (!t) throw notFound('tenant', ref);
  return t;
}

export async function listClusters(api: ApiClient, tenantId?: string): Promise<Cluster[]> {
  return (await api.json<{ clusters: Cluster[] }>('GET', '/v1/clusters', { query: { tenant: tenantId } })).clusters;
}

/** A cluster by id, or by name (within `--tenant` when names repeat across tenants). */
export async function findCluster(api: ApiClient, ref: string, tenantRef?: string): Promise<Cluster | undefined> {
  if (looksLikeId(ref, 'cl')) {
    try {
      return await api.json<Cluster>('GET', `/v1/clusters/${ref}`);
    } catch (err) {
      if (err instanceof ApiFailure && err.status === 404) return undefined;
      throw err;
    }
  }
  const tenantId = tenantRef ? (await resolveTenant(api, tenantRef)).id : undefined;
  const matches = (await listClusters(api, tenantId)).filter((c) => c.name === ref);
  if (matches.length > 1) throw usageError(`${matches.length} tenants have a cluster named "${ref}": say which with --tenant`);
  return matches[0];
}

export async function resolveCluster(api: ApiClient, ref: string, tenantRef?: string): Promise<Cluster> {
  const c = await findCluster(api, ref, tenantRef);
  if (!c) throw notFound('cluster', ref);
  return c;
}

export async function listMachines(api: ApiClient, clusterId: string): Promise<Machine[]> {
  return (await api.json<{ machines: Machine[] }>('GET', `/v1/clusters/${clusterId}/machines`)).machines;
}

export async function resolveMachine(api: ApiClient, cluster: Cluster, ref: string): Promise<Machine> {
  const m = (await listMachines(api, cluster.id)).find((x) => x.id === ref || x.name === ref);
  if (!m) throw notFound(`machine in cluster ${cluster.name}`, ref);
  return m;
}
