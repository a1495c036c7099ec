import type { FC } from 'hono/jsx';
import { raw } from 'hono/html';
import type { Json } from '../api.ts';
import { formatValue, renderChart, type Unit } from '../chart.ts';
import { Badge, Csrf, Field, Layout } from '../layout.tsx';
import { href, type FormValues, type View } from '../view.ts';

export interface ChartWindow {
  key: string;
  label: string;
  ms: number;
  resolution: 'raw' | 'hour';
}

export const WINDOWS: ChartWindow[] = [
  { key: '1h', label: '1 hour', ms: 3_600_000, resolution: 'raw' },
  { key: '6h', label: '6 hours', ms: 6 * 3_600_000, resolution: 'raw' },
  { key: '24h', label: '24 hours', ms: 24 * 3_600_000, resolution: 'raw' },
  { key: '7d', label: '7 days', ms: 7 * 24 * 3_600_000, resolution: 'hour' },
];

/** The charts a machine page shows, in order; a metric a node does not report is left out. */
const CHARTS: Array<{ metric: string; title: string; unit: Unit; controlPlaneOnly?: boolean }> = [
  { metric: 'cpu.utilization', title: 'CPU busy', unit: 'ratio' },
  { metric: 'memory.used_bytes', title: 'Memory in use', unit: 'bytes' },
  { metric: 'load.1', title: 'Load average (1 min)', unit: 'plain' },
  { metric: 'disk.var.used_bytes', title: 'Disk used on /var', unit: 'bytes' },
  { metric: 'etcd.db_size_bytes', title: 'etcd database size', unit: 'bytes', controlPlaneOnly: true },
];

/** The cluster's version, and the components this machine's config already carries at another (an upgrade that stopped part-way). */
function kubernetesFacts(clusterVersion: string, held: Record<string, string> | null | undefined): string {
  const apart = Object.entries(held ?? {});
  if (apart.length === 0) return clusterVersion;
  return `${clusterVersion}; ${apart.map(([component, version]) => `${component} ${version}`).join(', ')} (an unfinished upgrade)`;
}

export const MachinePage: FC<{
  v: View;
  cluster: Json;
  machine: Json;
  series: Record<string, Array<[number, number]>>;
  window: ChartWindow;
  windows: ChartWindow[];
  from: number;
  to: number;
  error?: string | undefined;
  values: FormValues;
  failed?: 'edit' | 'delete';
}> = ({ v, cluster, machine, series, window, windows, from, to, error, values, failed }) => {
  const base = `/clusters/${encodeURIComponent(cluster.id)}/machines/${encodeURIComponent(machine.id)}`;
  const edit = failed === 'edit' ? values : { address: machine.address ?? '', installDisk: machine.installDisk ?? '' };
  return (
    <Layout v={v} title={`Machine ${machine.name}`} section="clusters">
      <p>
        <a href={href(v, `/clusters/${encodeURIComponent(cluster.id)}`)}>← Cluster {String(cluster.name)}</a>
      </p>
      <dl class="facts">
        <dt>Role</dt>
        <dd>{String(machine.role)}</dd>
        <dt>Provider</dt>
        <dd>{String(machine.provider)}</dd>
        <dt>State</dt>
        <dd>
          <Badge state={String(machine.state)} />
        </dd>
        <dt>Talos</dt>
        <dd>{machine.talosVersion ? String(machine.talosVersion) : '—'}</dd>
        <dt>Kubernetes</dt>
        <dd id="m-kubernetes">{kubernetesFacts(String(cluster.kubernetesVersion), machine.kubernetesComponents)}</dd>
        <dt>Address</dt>
        <dd class="mono">{String(machine.address ?? machine.ipv6 ?? machine.ipv4 ?? '—')}</dd>
      </dl>

      <section aria-labelledby="charts-h">
        <h2 id="charts-h">Resource use</h2>
        <nav class="windows" aria-label="Time window">
          {windows.map((w) => (
            <a href={href(v, `${base}?window=${w.key}`)} aria-current={w.key === window.key ? 'true' : undefined} class="chip">
              {w.label}
            </a>
          ))}
        </nav>
        <div class="charts">
          {CHARTS.filter((ch) => !ch.controlPlaneOnly || machine.role === 'controlplane').map((ch) => (
            <figure class="chart-box" id={`chart-${ch.metric.replaceAll('.', '-')}`}>
              <figcaption>
                {ch.title}
                {series[ch.metric]?.length ? <span class="now"> {formatValue(series[ch.metric]!.at(-1)![1], ch.unit)}</span> : null}{' '}
                <span class="hint">
                  · last {window.label}
                  {window.resolution === 'hour' ? ', hourly averages' : ''}
                </span>
              </figcaption>
              {raw(renderChart({ points: series[ch.metric] ?? [], unit: ch.unit, title: ch.title, from, to }))}
            </figure>
          ))}
        </div>
      </section>

      <section aria-labelledby="edit-h">
        <h2 id="edit-h">Edit machine</h2>
        <form method="post" action={href(v, `${base}/edit`)} class="card" novalidate>
          <Csrf v={v} />
          {failed === 'edit' && error && (
            <p class="field-error" role="alert">
              {error}
            </p>
          )}
          <div class="fields">
            <Field id="me-address" name="address" label="Address" hint="IP or host[:port]; empty to clear" value={edit.address} />
            <Field id="me-disk" name="installDisk" label="Install disk" hint="empty for the default" value={edit.installDisk} />
          </div>
          <button type="submit">Save changes</button>
        </form>
        <form method="post" action={href(v, `${base}/delete`)} class="card danger-zone">
          <Csrf v={v} />
          <h3>Delete machine</h3>
          {failed === 'delete' && error && (
            <p class="field-error" role="alert">
              {error}
            </p>
          )}
          <p class="hint">Removes {String(machine.name)} from the inventory. A cloud machine is destroyed at the next apply.</p>
          <button type="submit" class="danger">
            Delete {String(machine.name)}
          </button>
        </form>
      </section>
      {!failed && error && (
        <p class="alert" role="alert">
          {error}
        </p>
      )}
    </Layout>
  );
};
