import type { FC } from 'hono/jsx';
import type { Json } from '../api.ts';
import { Badge, Time } from '../layout.tsx';
import { href, type View } from '../view.ts';

export const RunsTable: FC<{ v: View; runs: Json[]; showCluster?: boolean }> = ({ v, runs, showCluster = true }) =>
  runs.length === 0 ? (
    <p class="notice">No runs yet.</p>
  ) : (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th scope="col">Run</th>
            <th scope="col">Kind</th>
            <th scope="col">State</th>
            {showCluster && <th scope="col">Cluster</th>}
            <th scope="col">Created</th>
            <th scope="col">Finished</th>
          </tr>
        </thead>
        <tbody>
          {runs.map((r) => (
            <tr>
              <td class="mono">
                <a href={href(v, `/runs/${encodeURIComponent(r.id)}`)}>{String(r.id)}</a>
              </td>
              <td>{String(r.kind)}</td>
              <td>
                <Badge state={String(r.state)} />
              </td>
              {showCluster && (
                <td class="mono">
                  {r.cluster ? <a href={href(v, `/clusters/${encodeURIComponent(r.cluster)}`)}>{String(r.cluster)}</a> : '—'}
                </td>
              )}
              <td>
                <Time ms={r.createdAt} />
              </td>
              <td>
                <Time ms={r.finishedAt} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
