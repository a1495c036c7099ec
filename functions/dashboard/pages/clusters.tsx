import type { FC } from 'hono/jsx';
import type { Json } from '../api.ts';
import type { ClusterHealth } from '../health-view.ts';
import { Badge, CardTable, Csrf, errorFor, Field, Layout, Select } from '../layout.tsx';
import { href, type FormValues, type View } from '../view.ts';

export const HealthBadge: FC<{ health: ClusterHealth | undefined }> = ({ health }) => (
  <span class="health">
    <Badge state={health?.status ?? 'unknown'} />
    {health?.summary && <span class="hint reason"> {health.summary}</span>}
  </span>
);

export const ClustersPage: FC<{
  v: View;
  clusters: Json[];
  tenants: Json[];
  health: Record<string, ClusterHealth>;
  error?: string | undefined;
  values?: FormValues;
}> = ({ v, clusters, tenants, health, error, values = {} }) => {
  const tenantName = new Map(tenants.map((t) => [t.id, t.name]));
  // A complaint about a field of the form stands next to that field.
  const problem = values.name !== undefined ? errorFor(error, ['tenant', 'name', 'talosVersion', 'kubernetesVersion', 'endpoint']) : undefined;
  const at = (f: string) => (problem?.field === f ? problem.message : undefined);
  return (
    <Layout v={v} title="Clusters" section="clusters" error={problem?.field ? undefined : error}>
      <section aria-label="All clusters">
        {clusters.length === 0 ? (
          <p class="notice">No clusters yet.</p>
        ) : (
          <CardTable columns={['Name', 'Tenant', 'Health', 'Talos', 'Kubernetes', 'Endpoint']}>
            {clusters.map((cl) => (
              <tr>
                <td data-label="Name">
                  <a href={href(v, `/clusters/${encodeURIComponent(cl.id)}`)}>{String(cl.name)}</a>
                </td>
                <td data-label="Tenant">{String(tenantName.get(cl.tenant) ?? cl.tenant)}</td>
                <td data-label="Health">
                  <HealthBadge health={health[cl.id]} />
                </td>
                <td data-label="Talos">{String(cl.talosVersion)}</td>
                <td data-label="Kubernetes">{String(cl.kubernetesVersion)}</td>
                <td data-label="Endpoint" class="mono">{String(cl.endpoint)}</td>
              </tr>
            ))}
          </CardTable>
        )}
      </section>
      <section aria-labelledby="new-cluster-h">
        <h2 id="new-cluster-h">New cluster</h2>
        {tenants.length === 0 ? (
          <p class="notice">
            Create a <a href={href(v, '/tenants')}>tenant</a> first.
          </p>
        ) : (
          <form method="post" action={href(v, '/clusters')} class="card">
            <Csrf v={v} />
            <div class="fields">
              <Select
                id="cl-tenant"
                name="tenant"
                label="Tenant"
                value={values.tenant}
                required
                options={tenants.map((t) => [String(t.id), String(t.name)])}
              />
              <Field id="cl-name" name="name" label="Name" hint="a DNS label" value={values.name} error={at('name')} required />
              <Field id="cl-talos" name="talosVersion" label="Talos version" placeholder="v1.13.9" value={values.talosVersion} error={at('talosVersion')} required />
              <Field id="cl-k8s" name="kubernetesVersion" label="Kubernetes version" placeholder="1.36.3" value={values.kubernetesVersion} error={at('kubernetesVersion')} required />
              <Field id="cl-endpoint" name="endpoint" label="API endpoint" placeholder="https://[2001:db8::1]:6443" value={values.endpoint} error={at('endpoint')} required />
            </div>
            <button type="submit">Create cluster</button>
          </form>
        )}
      </section>
    </Layout>
  );
};
