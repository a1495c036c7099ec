import type { FC } from 'hono/jsx';
import { raw } from 'hono/html';
import type { Json } from '../api.ts';
import type { ClusterHealthReport } from '../health-view.ts';
import { ActionButton, Badge, Csrf, Field, Layout, Select, Time } from '../layout.tsx';
import { renderSparkline } from '../sparkline.ts';
import { href, type FormValues, type View } from '../view.ts';
import { HealthBadge } from './clusters.tsx';
import { RunsTable } from './runs-table.tsx';

export const ROLES: Array<[string, string]> = [
  ['controlplane', 'Control plane'],
  ['worker', 'Worker'],
];
export const PROVIDERS: Array<[string, string]> = [
  ['metal', 'Bare metal'],
  ['local', 'Local (testing)'],
  ['hetzner', 'Hetzner'],
  ['oci', 'OCI'],
  ['openstack', 'OpenStack'],
  ['aws', 'AWS'],
];
// talosctl's spelling of the apply modes; the push-config API validates what it accepts.
const APPLY_MODES: Array<[string, string]> = [
  ['', 'Default'],
  ['auto', 'auto'],
  ['reboot', 'reboot'],
  ['no-reboot', 'no-reboot'],
  ['staged', 'staged'],
  ['try', 'try'],
];

export interface ClusterPageProps {
  v: View;
  cluster: Json;
  machines: Json[];
  runs: Json[];
  health: ClusterHealthReport;
  error?: string | undefined;
  /** The form that failed, so its values are kept: e.g. "machine", "upgrade". */
  failedForm?: string;
  values?: FormValues;
}

export const ClusterPage: FC<ClusterPageProps> = ({ v, cluster, machines, runs, health, error, failedForm, values = {} }) => {
  const cid = encodeURIComponent(cluster.id);
  const keep = (form: string) => (failedForm === form ? values : {});
  return (
    <Layout v={v} title={`Cluster ${cluster.name}`} section="clusters" error={error}>
      <section aria-labelledby="facts-h">
        <h2 id="facts-h">Overview</h2>
        <dl class="facts">
          <dt>Id</dt>
          <dd class="mono">{String(cluster.id)}</dd>
          <dt>Health</dt>
          <dd>
            <HealthBadge health={health.cluster} />
          </dd>
          <dt>Talos</dt>
          <dd>{String(cluster.talosVersion)}</dd>
          <dt>Kubernetes</dt>
          <dd>{String(cluster.kubernetesVersion)}</dd>
          <dt>Endpoint</dt>
          <dd class="mono">{String(cluster.endpoint)}</dd>
          <dt>Bootstrapped</dt>
          <dd>{cluster.bootstrapped ? <Time ms={cluster.bootstrappedAt} /> : 'not yet'}</dd>
        </dl>
      </section>

      <section aria-labelledby="actions-h">
        <h2 id="actions-h">Actions</h2>
        <div class="actions">
          <ActionButton v={v} action={`/clusters/${cid}/provision`} label="Plan">
            <input type="hidden" name="mode" value="plan" />
          </ActionButton>
          <ActionButton v={v} action={`/clusters/${cid}/provision`} label="Apply" kind="secondary">
            <input type="hidden" name="mode" value="apply" />
          </ActionButton>
          <ActionButton v={v} action={`/clusters/${cid}/bootstrap`} label="Bootstrap" kind="secondary" />
        </div>
        <form method="post" action={href(v, `/clusters/${cid}/upgrade`)} class="card">
          <h3>Upgrade Talos</h3>
          <Csrf v={v} />
          <div class="fields">
            <Field id="up-version" name="talosVersion" label="Talos version" placeholder="v1.13.9" value={keep('upgrade').talosVersion} required />
            <Field id="up-batch" name="batchSize" label="Batch size" hint="optional" type="number" value={keep('upgrade').batchSize} />
          </div>
          <button type="submit">Upgrade</button>
        </form>
      </section>

      <section aria-labelledby="machines-h">
        <h2 id="machines-h">Machines</h2>
        {machines.length === 0 ? (
          <p class="notice">No machines yet.</p>
        ) : (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Role</th>
                  <th scope="col">State</th>
                  <th scope="col">Health</th>
                  <th scope="col">Talos</th>
                  <th scope="col">Address</th>
                  <th scope="col">Last seen</th>
                  <th scope="col">CPU, memory</th>
                  <th scope="col">Config</th>
                </tr>
              </thead>
              <tbody>
                {machines.map((m) => {
                  const mh = health.machines[m.id];
                  const mid = encodeURIComponent(m.id);
                  return (
                    <tr>
                      <td>
                        {String(m.name)}
                        <div class="hint mono">{String(m.id)}</div>
                      </td>
                      <td>{String(m.role)}</td>
                      <td>
                        <Badge state={String(m.state)} />
                      </td>
                      <td>
                        <Badge state={mh?.status ?? 'unknown'} id={`health-${m.id}`} />
                      </td>
                      <td>{m.talosVersion ? String(m.talosVersion) : '—'}</td>
                      <td class="mono">{m.address ? String(m.address) : '—'}</td>
                      <td>{mh?.lastSeen ? <Time ms={mh.lastSeen} /> : 'never'}</td>
                      <td>
                        {raw(renderSparkline(mh?.samples ?? [], { label: `${m.name} ${mh?.samplesLabel ?? 'CPU'}`, width: 96, height: 24 }))}
                        {raw(renderSparkline(mh?.memory ?? [], { label: `${m.name} memory`, width: 96, height: 24 }))}
                      </td>
                      <td>
                        <details>
                          <summary>Push config</summary>
                          <form method="post" action={href(v, `/clusters/${cid}/machines/${mid}/push-config`)}>
                            <Csrf v={v} />
                            <div class="field check">
                              <input id={`ins-${m.id}`} type="checkbox" name="insecure" value="on" />
                              <label for={`ins-${m.id}`}>Maintenance mode (no client certificate)</label>
                            </div>
                            <Field id={`fp-${m.id}`} name="certFingerprint" label="Certificate fingerprint" hint="optional" />
                            <Select id={`mode-${m.id}`} name="mode" label="Apply mode" options={APPLY_MODES} />
                            <p>
                              <button type="submit">Push config to {String(m.name)}</button>
                            </p>
                          </form>
                        </details>
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
        <form method="post" action={href(v, `/clusters/${cid}/machines`)} class="card">
          <h3>Add a machine</h3>
          <Csrf v={v} />
          <div class="fields">
            <Field id="m-name" name="name" label="Name" hint="a DNS label" value={keep('machine').name} required />
            <Select id="m-role" name="role" label="Role" options={ROLES} value={keep('machine').role} required />
            <Select id="m-provider" name="provider" label="Provider" options={PROVIDERS} value={keep('machine').provider} required />
            <Field id="m-address" name="address" label="Address" hint="optional, IP or host[:port]" value={keep('machine').address} />
            <Field id="m-disk" name="installDisk" label="Install disk" hint="optional" placeholder="/dev/sda" value={keep('machine').installDisk} />
          </div>
          <button type="submit">Add machine</button>
        </form>
      </section>

      <section aria-labelledby="runs-h">
        <h2 id="runs-h">Recent runs</h2>
        <RunsTable v={v} runs={runs} showCluster={false} />
      </section>
    </Layout>
  );
};
