import type { FC } from 'hono/jsx';
import type { Json } from '../api.ts';
import { formatValue } from '../chart.ts';
import { compareVersions } from '../../../lib/talos/versions.ts';
import type { ClusterHealthReport, MachineHealth } from '../health-view.ts';
import { ActionButton, Badge, CardTable, Csrf, errorFor, Field, Layout, Select, Time } from '../layout.tsx';
import { href, type FormValues, type View } from '../view.ts';
import { HealthBadge } from './clusters.tsx';
import { RunsTable } from './runs-table.tsx';
import { MeshSection } from './mesh-section.tsx';
import { EtcdSection } from './etcd-section.tsx';

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
/** talosctl's --manifests-inventory-policy values, the default first; the API validates what it accepts. */
const INVENTORY_POLICY_OPTIONS: Array<[string, string]> = [
  ['AdoptIfNoInventory', 'Its own and those no inventory owns (default)'],
  ['MustMatch', 'Only its own'],
  ['AdoptAll', "Any, another inventory's too"],
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
  /** GET /v1/clusters/:id/mesh, when it could be read. */
  mesh?: Json;
  /** GET /v1/clusters/:id/etcd-snapshots' list, when it could be read. */
  snapshots?: Json[] | undefined;
  error?: string | undefined;
  /** The form that failed, so its values are kept: e.g. "machine", "upgrade". */
  failedForm?: string;
  values?: FormValues;
  now: number;
}

const INLINE_FORMS = new Set(['upgrade', 'upgrade-kubernetes', 'machine', 'edit', 'delete', 'mesh', 'etcd', 'cluster-push']);

/** The API's message next to the form it belongs to. */
export const FieldError: FC<{ show: boolean; error: string | undefined }> = ({ show, error }) =>
  show && error ? (
    <p class="field-error" role="alert">
      {error}
    </p>
  ) : null;

function usage(mh: MachineHealth | undefined): string {
  const cpu = mh?.samples?.at(-1);
  const mem = mh?.memory?.at(-1);
  const parts: string[] = [];
  if (cpu !== undefined) parts.push(mh?.samplesLabel === 'CPU' ? `CPU ${formatValue(cpu, 'ratio')}` : `load ${formatValue(cpu, 'plain')}`);
  if (mem !== undefined) parts.push(`mem ${formatValue(mem, 'bytes')}`);
  return parts.length ? parts.join(' · ') : 'charts';
}

/** Both upgrade forms: an etcd snapshot before the first node is touched, unless unticked. */
const SnapshotFirst: FC<{ id: string; checked: boolean }> = ({ id, checked }) => (
  <div class="field check">
    <input id={id} type="checkbox" name="etcdSnapshot" value="on" checked={checked} />
    <label for={id}>Take an etcd snapshot first</label>
  </div>
);

/** An upgrade that stopped part-way: the versions machines' configs already carry, and those machines. */
function unfinishedUpgrade(machines: Json[]): { versions: string[]; names: string[] } | undefined {
  const held = machines.filter((m) => m.kubernetesComponents && Object.keys(m.kubernetesComponents).length > 0);
  if (held.length === 0) return undefined;
  const versions = [...new Set(held.flatMap((m) => Object.values(m.kubernetesComponents as Record<string, string>)))].sort(compareVersions);
  return { versions, names: held.map((m) => String(m.name)) };
}

export const ClusterPage: FC<ClusterPageProps> = ({ v, cluster, machines, runs, health, mesh, snapshots, error, failedForm, values = {}, now }) => {
  const cid = encodeURIComponent(cluster.id);
  const keep = (form: string) => (failedForm === form ? values : {});
  const problem = (form: string, fields: string[]) => (failedForm === form ? errorFor(error, fields) : undefined);
  const machineErr = problem('machine', ['name', 'role', 'provider', 'address', 'installDisk']);
  const upgradeErr = problem('upgrade', ['talosVersion', 'batchSize']);
  const k8sErr = problem('upgrade-kubernetes', ['version']);
  const unfinished = unfinishedUpgrade(machines);
  const editErr = problem('edit', ['kubernetesVersion', 'endpoint']);
  const at = (p: ReturnType<typeof errorFor>, field: string) => (p?.field === field ? p.message : undefined);
  return (
    <Layout v={v} title={`Cluster ${cluster.name}`} section="clusters" error={failedForm && INLINE_FORMS.has(failedForm) ? undefined : error}>
      <section aria-labelledby="facts-h">
        <h2 id="facts-h">Overview</h2>
        <dl class="facts">
          <dt>Id</dt>
          <dd class="mono">{String(cluster.id)}</dd>
          <dt>Health</dt>
          <dd>
            <HealthBadge health={health.cluster} />
            {(health.cluster.reasons?.length ?? 0) > 1 && (
              <details>
                <summary>All reasons</summary>
                <ul class="reasons">
                  {health.cluster.reasons!.map((r) => (
                    <li>{r}</li>
                  ))}
                </ul>
              </details>
            )}
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
          {!cluster.bootstrapped && <ActionButton v={v} action={`/clusters/${cid}/bootstrap`} label="Bootstrap" kind="secondary" id="bootstrap" />}
          <ActionButton v={v} action={`/clusters/${cid}/destroy`} label="Plan destroy" kind="danger" />
        </div>
        <p class="downloads">
          <a href={href(v, `/clusters/${cid}/talosconfig`)} download>
            Download talosconfig
          </a>{' '}
          ·{' '}
          <a href={href(v, `/clusters/${cid}/kubeconfig`)} download>
            Download kubeconfig
          </a>
        </p>
        <form method="post" action={href(v, `/clusters/${cid}/upgrade`)} class="card">
          <h3>Upgrade Talos</h3>
          <p class="hint">The cluster runs {String(cluster.talosVersion)}.</p>
          <Csrf v={v} />
          <FieldError show={!upgradeErr?.field} error={upgradeErr?.message} />
          <div class="fields">
            <Field id="up-version" name="talosVersion" label="Talos version" placeholder={String(cluster.talosVersion)} value={keep('upgrade').talosVersion} error={at(upgradeErr, 'talosVersion')} required />
            <Field id="up-batch" name="batchSize" label="Batch size" hint="optional" type="number" value={keep('upgrade').batchSize} error={at(upgradeErr, 'batchSize')} />
          </div>
          <SnapshotFirst id="up-snap" checked={failedForm === 'upgrade' ? values.etcdSnapshot === 'on' : true} />
          <button type="submit">Upgrade</button>
        </form>
        <form method="post" action={href(v, `/clusters/${cid}/upgrade-kubernetes`)} class="card">
          <h3>Upgrade Kubernetes</h3>
          <p class="hint">The cluster runs Kubernetes {String(cluster.kubernetesVersion)}; one minor version at a time.</p>
          {unfinished ? (
            <p class="notice" id="k8s-unfinished">
              An upgrade to {unfinished.versions.join(', ')} stopped part-way: {unfinished.names.join(', ')} already run some components on it. Upgrade again to
              finish; pushes meanwhile keep those components where they are.
            </p>
          ) : null}
          <Csrf v={v} />
          <FieldError show={!k8sErr?.field} error={k8sErr?.message} />
          <div class="fields">
            <Field
              id="k8s-version"
              name="version"
              label="Kubernetes version"
              placeholder={String(cluster.kubernetesVersion)}
              value={keep('upgrade-kubernetes').version ?? unfinished?.versions.at(-1)}
              error={at(k8sErr, 'version')}
              required
            />
          </div>
          <SnapshotFirst id="k8s-snap" checked={failedForm === 'upgrade-kubernetes' ? values.etcdSnapshot === 'on' : true} />
          <div class="field check">
            <input id="k8s-pending" type="checkbox" name="includePendingConfig" value="on" checked={failedForm === 'upgrade-kubernetes' && values.includePendingConfig === 'on'} />
            <label for="k8s-pending">Also push config changes the nodes do not run yet (otherwise the run stops on them)</label>
          </div>
          <div class="field check">
            <input id="k8s-manifests" type="checkbox" name="manifests" value="on" checked={failedForm === 'upgrade-kubernetes' ? values.manifests === 'on' : true} />
            <label for="k8s-manifests">Sync the bootstrap manifests at the end</label>
          </div>
          <div class="field check">
            <input id="k8s-recreate" type="checkbox" name="recreateManifests" value="on" checked={failedForm === 'upgrade-kubernetes' && values.recreateManifests === 'on'} />
            <label for="k8s-recreate">In that sync, recreate objects whose immutable fields changed</label>
          </div>
          <button type="submit">Upgrade Kubernetes</button>
        </form>
        {cluster.bootstrapped && (
          <form method="post" action={href(v, `/clusters/${cid}/sync-manifests`)} class="card" id="sync-manifests">
            <h3>Bootstrap manifests</h3>
            <p class="hint">Applies what the control planes render (kube-proxy, CoreDNS, the CNI, inline manifests), as the end of a Kubernetes upgrade does; the preview changes nothing.</p>
            <Csrf v={v} />
            <div class="field check">
              <input id="sm-prune" type="checkbox" name="prune" value="on" checked />
              <label for="sm-prune">Delete what the manifests no longer name</label>
            </div>
            <div class="field check">
              <input id="sm-recreate" type="checkbox" name="recreate" value="on" />
              <label for="sm-recreate">Recreate objects whose immutable fields changed</label>
            </div>
            <div class="fields">
              <Select id="sm-policy" name="inventoryPolicy" label="Objects it may take over and prune" options={INVENTORY_POLICY_OPTIONS} />
            </div>
            <div class="actions">
              <button type="submit">Sync manifests</button>
              <button type="submit" name="dryRun" value="on" class="secondary">
                Preview manifest sync
              </button>
            </div>
          </form>
        )}
      </section>

      <section aria-labelledby="machines-h">
        <h2 id="machines-h">Machines</h2>
        {machines.length === 0 ? (
          <p class="notice">No machines yet.</p>
        ) : (
          <CardTable columns={['Name', 'Role', 'State', 'Health', 'Talos', 'Address', 'Last seen', 'CPU, memory', 'Config']}>
            {machines.map((m) => {
              const mh = health.machines[m.id];
              const mid = encodeURIComponent(m.id);
              return (
                <tr>
                  <td data-label="Name">
                    <a href={href(v, `/clusters/${cid}/machines/${mid}`)}>{String(m.name)}</a>
                  </td>
                  <td data-label="Role">{String(m.role)}</td>
                  <td data-label="State">
                    <Badge state={String(m.state)} />
                  </td>
                  <td data-label="Health">
                    <Badge state={mh?.status ?? 'unknown'} id={`health-${m.id}`} />
                  </td>
                  <td data-label="Talos">{m.talosVersion ? String(m.talosVersion) : '—'}</td>
                  <td data-label="Address" class="mono addr">
                    {m.address ? String(m.address) : '—'}
                  </td>
                  <td data-label="Last seen">{mh?.lastSeen ? <Time ms={mh.lastSeen} /> : 'never'}</td>
                  <td data-label="CPU, memory">
                    <a href={href(v, `/clusters/${cid}/machines/${mid}`)} class="usage">
                      {usage(mh)}
                    </a>
                  </td>
                  <td data-label="Config">
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
          </CardTable>
        )}
        {machines.some((m) => m.provider === 'metal') ? (
          <form method="post" action={href(v, `/clusters/${cid}/push-config`)} class="card" id="cluster-push">
            <h3>Push config to every bare-metal machine</h3>
            <p class="hint">One run, the machines concurrently; one that fails fails alone and is named at the end.</p>
            <Csrf v={v} />
            <FieldError show={failedForm === 'cluster-push'} error={error} />
            <div class="field check">
              <input id="cp-insecure" type="checkbox" name="insecure" value="on" checked={failedForm === 'cluster-push' && values.insecure === 'on'} />
              <label for="cp-insecure">Machines in maintenance mode (no client certificate; no fingerprints pinned from here)</label>
            </div>
            {!cluster.bootstrapped && (
              <div class="field check">
                <input id="cp-bootstrap" type="checkbox" name="bootstrap" value="on" checked={failedForm === 'cluster-push' && values.bootstrap === 'on'} />
                <label for="cp-bootstrap">Bootstrap the first control plane once it is configured</label>
              </div>
            )}
            <button type="submit">Push to every bare-metal machine</button>
          </form>
        ) : null}
        <form method="post" action={href(v, `/clusters/${cid}/machines`)} class="card">
          <h3>Add a machine</h3>
          <Csrf v={v} />
          <FieldError show={!machineErr?.field} error={machineErr?.message} />
          <div class="fields">
            <Field id="m-name" name="name" label="Name" hint="a DNS label" value={keep('machine').name} error={at(machineErr, 'name')} required />
            <Select id="m-role" name="role" label="Role" options={ROLES} value={keep('machine').role} required />
            <Select id="m-provider" name="provider" label="Provider" options={PROVIDERS} value={keep('machine').provider} required />
            <Field id="m-address" name="address" label="Address" hint="optional, IP or host[:port]" value={keep('machine').address} error={at(machineErr, 'address')} />
            <Field id="m-disk" name="installDisk" label="Install disk" hint="optional" placeholder="/dev/sda" value={keep('machine').installDisk} error={at(machineErr, 'installDisk')} />
          </div>
          <button type="submit">Add machine</button>
        </form>
      </section>

      <EtcdSection
        v={v}
        cid={cid}
        bootstrapped={Boolean(cluster.bootstrapped)}
        snapshots={snapshots}
        controlPlanes={machines.filter((m) => m.role === 'controlplane')}
        error={failedForm === 'etcd' ? error : undefined}
      />

      <MeshSection v={v} cid={cid} mesh={mesh} now={now} error={failedForm === 'mesh' ? error : undefined} endpoint={keep('mesh').endpoint} />

      <section aria-labelledby="edit-h">
        <h2 id="edit-h">Settings</h2>
        <form method="post" action={href(v, `/clusters/${cid}/edit`)} class="card" novalidate>
          <h3>Edit cluster</h3>
          <Csrf v={v} />
          <FieldError show={!editErr?.field} error={editErr?.message} />
          <div class="fields">
            {cluster.bootstrapped ? (
              // A running cluster's version moves only through the upgrade above (the API refuses it here).
              <div class="field">
                <span class="label">Kubernetes version</span>
                <p id="ce-k8s" class="value">
                  {String(cluster.kubernetesVersion)} <span class="hint">— change it with Upgrade Kubernetes</span>
                </p>
              </div>
            ) : (
              <Field id="ce-k8s" name="kubernetesVersion" label="Kubernetes version" value={failedForm === 'edit' ? values.kubernetesVersion : String(cluster.kubernetesVersion)} error={at(editErr, 'kubernetesVersion')} />
            )}
            <Field id="ce-endpoint" name="endpoint" label="API endpoint" value={failedForm === 'edit' ? values.endpoint : String(cluster.endpoint)} error={at(editErr, 'endpoint')} />
          </div>
          <button type="submit">Save changes</button>
        </form>
        <form method="post" action={href(v, `/clusters/${cid}/delete`)} class="card danger-zone">
          <h3>Delete cluster</h3>
          <Csrf v={v} />
          <FieldError show={failedForm === 'delete'} error={error} />
          <p class="hint">Removes the cluster and its machines from RezusCloud. Destroy cloud machines first with "Plan destroy".</p>
          <button type="submit" class="danger">
            Delete {String(cluster.name)}
          </button>
        </form>
      </section>

      <section aria-labelledby="runs-h">
        <h2 id="runs-h">Recent runs</h2>
        <RunsTable v={v} runs={runs} showCluster={false} now={now} />
      </section>
    </Layout>
  );
};
