import type { FC } from 'hono/jsx';
import type { Json } from '../api.ts';
import { Badge, CardTable, Time } from '../layout.tsx';
import { formatDuration, runDuration, startedBy } from '../run-view.ts';
import { href, type View } from '../view.ts';

export interface RunFilter {
  kind?: string;
  state?: string;
  collect?: string;
}

const STATES = ['queued', 'running', 'succeeded', 'failed', 'canceled', 'interrupted'];

export const RunFilters: FC<{ v: View; filter: RunFilter; kinds: string[] }> = ({ v, filter, kinds }) => (
  <form method="get" action={href(v, '/runs')} class="filters" aria-label="Filter runs">
    <div class="field">
      <label for="f-kind">Kind</label>
      <select id="f-kind" name="kind">
        <option value="">All kinds</option>
        {kinds.map((k) => (
          <option value={k} selected={k === filter.kind}>
            {k}
          </option>
        ))}
      </select>
    </div>
    <div class="field">
      <label for="f-state">State</label>
      <select id="f-state" name="state">
        <option value="">All states</option>
        {STATES.map((s) => (
          <option value={s} selected={s === filter.state}>
            {s}
          </option>
        ))}
      </select>
    </div>
    <div class="field check">
      <input id="f-collect" type="checkbox" name="collect" value="show" checked={filter.collect === 'show'} />
      <label for="f-collect">Show collect runs</label>
    </div>
    <button type="submit" class="secondary">
      Filter
    </button>
  </form>
);

const describe = (r: Json) =>
  r.kind === 'provision' && r.params?.mode ? `provision · ${String(r.params.mode)}${r.params.destroy ? ' (destroy)' : ''}` : String(r.kind);

/** Runs as a table on wide screens and as cards on a phone (the CSS turns rows into cards). */
export const RunsTable: FC<{ v: View; runs: Json[]; names?: Record<string, string>; showCluster?: boolean; now: number }> = ({ v, runs, names = {}, showCluster = true, now }) =>
  runs.length === 0 ? (
    <p class="notice">No runs match.</p>
  ) : (
    <CardTable class="runs" columns={['Run', 'State', ...(showCluster ? ['Cluster'] : []), 'Started by', 'Created', 'Duration']}>
      {runs.map((r) => (
        <tr>
          <td data-label="Run">
            <a href={href(v, `/runs/${encodeURIComponent(r.id)}`)} title={String(r.id)}>
              {describe(r)}
            </a>
          </td>
          <td data-label="State">
            <Badge state={String(r.state)} />
          </td>
          {showCluster && (
            <td data-label="Cluster">{r.cluster ? <a href={href(v, `/clusters/${encodeURIComponent(r.cluster)}`)}>{names[r.cluster] ?? String(r.cluster)}</a> : '—'}</td>
          )}
          <td data-label="Started by">{startedBy(r.createdBy)}</td>
          <td data-label="Created">
            <Time ms={r.createdAt} />
          </td>
          <td data-label="Duration">{formatDuration(runDuration(r, now))}</td>
        </tr>
      ))}
    </CardTable>
  );
