// The cluster page's etcd section: the stored snapshots (GET /v1/clusters/:id/etcd-snapshots) with
// a download and a restore each, and the buttons that take one now or defragment the members.
import type { FC } from 'hono/jsx';
import type { Json } from '../api.ts';
import { formatBytes } from '../../../lib/bytes.ts';
import { ActionButton, CardTable, Csrf, Select, Time } from '../layout.tsx';
import { href, type View } from '../view.ts';

export const EtcdSection: FC<{ v: View; cid: string; bootstrapped: boolean; snapshots: Json[] | undefined; controlPlanes: Json[]; error?: string | undefined }> = ({
  v,
  cid,
  bootstrapped,
  snapshots,
  controlPlanes,
  error,
}) => {
  const targets: Array<[string, string]> = controlPlanes.map((m) => [String(m.name), String(m.name)]);
  return (
    <section aria-labelledby="etcd-h">
      <h2 id="etcd-h">etcd</h2>
      {error ? (
        <p class="field-error" role="alert" id="etcd-error">
          {error}
        </p>
      ) : null}
      {bootstrapped ? (
        <div class="actions">
          <ActionButton v={v} action={`/clusters/${cid}/etcd-snapshots`} label="Take a snapshot" id="etcd-take" />
          <ActionButton v={v} action={`/clusters/${cid}/etcd-defrag`} label="Defragment" kind="secondary" id="etcd-defrag" />
        </div>
      ) : (
        <p class="notice">Snapshots and defragmentation start once the cluster is bootstrapped.</p>
      )}
      {snapshots === undefined ? null : snapshots.length === 0 ? (
        <p class="notice" id="etcd-none">
          No snapshots yet.
        </p>
      ) : (
        <CardTable id="etcd-snapshots" columns={['Taken', 'From', 'Size', 'Revision', 'Why', 'Snapshot']}>
          {snapshots.map((s) => {
            const sid = encodeURIComponent(String(s.id));
            return (
              <tr>
                <td data-label="Taken">
                  <Time ms={s.createdAt} />
                </td>
                <td data-label="From">{String(s.machine)}</td>
                <td data-label="Size">{formatBytes(Number(s.sizeBytes))}</td>
                <td data-label="Revision" class="mono">
                  {String(s.revision)}
                </td>
                <td data-label="Why">{String(s.trigger)}</td>
                <td data-label="Snapshot">
                  <div>
                  <a href={href(v, `/clusters/${cid}/etcd-snapshots/${sid}`)} download>
                    Download
                  </a>
                  {targets.length > 0 ? (
                    <details>
                      <summary>Restore</summary>
                      <form method="post" action={href(v, `/clusters/${cid}/etcd-snapshots/${sid}/restore`)}>
                        <Csrf v={v} />
                        <p class="hint">
                          Onto a control plane that has its config but no etcd (reinstalled or reset, not bootstrapped): it starts a one-member etcd from this snapshot, and the
                          other control planes join it as they boot.
                        </p>
                        <Select id={`restore-${s.id}`} name="machine" label="Control plane" options={targets} required />
                        <p>
                          <button type="submit" class="danger">
                            Restore this snapshot
                          </button>
                        </p>
                      </form>
                    </details>
                  ) : null}
                  </div>
                </td>
              </tr>
            );
          })}
        </CardTable>
      )}
    </section>
  );
};
