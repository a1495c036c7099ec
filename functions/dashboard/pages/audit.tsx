import type { FC } from 'hono/jsx';
import type { Json } from '../api.ts';
import { ActionButton, Badge, CardTable, Layout, Time } from '../layout.tsx';
import { formatValue } from '../chart.ts';
import { formatDuration, runDuration, startedBy } from '../run-view.ts';
import { href, type View } from '../view.ts';

export const AuditPage: FC<{ v: View; entries: Json[]; tenants: Json[]; filter: { action: string; tenant: string }; error?: string | undefined }> = ({
  v,
  entries,
  tenants,
  filter,
  error,
}) => {
  const tenantName = new Map(tenants.map((t) => [t.id, String(t.name)]));
  return (
    <Layout v={v} title="Audit log" section="audit" error={error}>
      <form method="get" action={href(v, '/audit')} class="filters" aria-label="Filter the audit log">
        <div class="field">
          <label for="a-action">Action contains</label>
          <input id="a-action" type="text" name="action" value={filter.action} placeholder="cluster.create" />
        </div>
        <div class="field">
          <label for="a-tenant">Tenant</label>
          <select id="a-tenant" name="tenant">
            <option value="">All tenants</option>
            {tenants.map((t) => (
              <option value={String(t.id)} selected={t.id === filter.tenant}>
                {String(t.name)}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" class="secondary">
          Filter
        </button>
      </form>
      {entries.length === 0 ? (
        <p class="notice">No audit entries match.</p>
      ) : (
        <CardTable id="audit" columns={['When', 'Action', 'Tenant', 'By', 'Target']}>
          {entries.map((e) => (
            <tr>
              <td data-label="When">
                <Time ms={e.at ?? e.createdAt} />
              </td>
              <td data-label="Action">{String(e.action)}</td>
              <td data-label="Tenant">{e.tenantId ? (tenantName.get(e.tenantId) ?? String(e.tenantId)) : '—'}</td>
              <td data-label="By">{startedBy(e.actor)}</td>
              <td data-label="Target" class="mono">
                {String(e.target ?? e.subject ?? '—')}
              </td>
            </tr>
          ))}
        </CardTable>
      )}
    </Layout>
  );
};

const fileName = (p: unknown) => (typeof p === 'string' ? (p.split(/[\\/]/).at(-1) ?? p) : '—');

export const BackupsPage: FC<{ v: View; files: Json[]; runs: Json[]; now: number; error?: string | undefined }> = ({ v, files, runs, now, error }) => {
  const runOf = new Map(runs.filter((r) => r.result?.file).map((r) => [fileName(r.result.file), r]));
  const failed = runs.filter((r) => r.state !== 'succeeded');
  return (
    <Layout v={v} title="Backups" section="backups" error={error}>
      <p class="hint">Consistent copies of the database, written by backup runs into the data directory under backups/. Each backup run deletes the oldest beyond the number to keep (REZUS_BACKUP_KEEP).</p>
      {files.length === 0 ? (
        <p class="notice">No backup files yet.</p>
      ) : (
        <CardTable id="backups" columns={['File', 'Size', 'Taken', 'Run', <span class="sr-only">Actions</span>]}>
          {files.map((f) => {
            const run = runOf.get(String(f.name));
            return (
              <tr>
                <td data-label="File" class="mono">
                  <a href={href(v, `/backups/${encodeURIComponent(f.name)}`)} download>
                    {String(f.name)}
                  </a>
                </td>
                <td data-label="Size">{formatValue(Number(f.bytes), 'bytes')}</td>
                <td data-label="Taken">
                  <Time ms={f.modifiedAt} />
                </td>
                <td data-label="Run">{run ? <a href={href(v, `/runs/${encodeURIComponent(run.id)}`)}>{formatDuration(runDuration(run, now))}</a> : '—'}</td>
                <td data-label="">
                  <ActionButton v={v} action={`/backups/${encodeURIComponent(f.name)}/delete`} label="Delete" kind="danger" />
                </td>
              </tr>
            );
          })}
        </CardTable>
      )}
      {failed.length > 0 && (
        <>
          <h2>Backup runs that did not finish</h2>
          <ul class="plain">
            {failed.map((r) => (
              <li>
                <Badge state={String(r.state)} /> <a href={href(v, `/runs/${encodeURIComponent(r.id)}`)}>started <Time ms={r.createdAt} /></a>
              </li>
            ))}
          </ul>
        </>
      )}
    </Layout>
  );
};
