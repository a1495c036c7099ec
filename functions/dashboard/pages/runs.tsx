import type { FC } from 'hono/jsx';
import type { Json } from '../api.ts';
import { ActionButton, Badge, CardTable, Layout, Time } from '../layout.tsx';
import { EVENTS_PAGE_MAX } from '../../runs/routes.ts';
import type { RunLog } from '../run-log.ts';
import { diagnostics, formatCount, formatDuration, nodeProgress, planDiff, runDuration, runErrorText, startedBy, TERMINAL, type DiffGroup } from '../run-view.ts';
import { href, type View } from '../view.ts';
import { RunFilters, RunsTable, type RunFilter } from './runs-table.tsx';

export const RunsPage: FC<{ v: View; runs: Json[]; names: Record<string, string>; filter: RunFilter; kinds: string[]; hidden: number; now: number; error?: string | undefined }> = ({
  v,
  runs,
  names,
  filter,
  kinds,
  hidden,
  now,
  error,
}) => (
  <Layout v={v} title="Runs" section="runs" error={error}>
    {v.principal?.admin && (
      <div class="actions">
        <ActionButton v={v} action="/backups" label="Start backup" />
      </div>
    )}
    <RunFilters v={v} filter={filter} kinds={kinds} />
    {hidden > 0 && (
      <p class="hint" id="hidden-collect">
        {hidden} collect run{hidden === 1 ? '' : 's'} hidden. <a href={href(v, `/runs?${new URLSearchParams({ ...filter, collect: 'show' }).toString()}`)}>Show them</a>
      </p>
    )}
    <RunsTable v={v} runs={runs} names={names} now={now} />
  </Layout>
);

/** Plan runs wait for a person to approve them; the approve API decides whether this one can be. */
export function awaitsApproval(run: Json): boolean {
  return run.kind === 'provision' && run.params?.mode === 'plan' && run.state === 'succeeded' && run.result?.approved !== true && run.result?.hasChanges !== false;
}

/** Kinds the dashboard can start again with the same parameters. */
export const RETRYABLE = new Set(['provision', 'bootstrap', 'upgrade', 'upgrade-kubernetes', 'sync-manifests', 'backup']);

const GROUP_LABEL: Record<DiffGroup, [string, string]> = {
  add: ['+', 'will be created'],
  change: ['~', 'will be updated in place'],
  replace: ['-/+', 'will be replaced'],
  destroy: ['-', 'will be destroyed'],
};

const PlanDiff: FC<{ run: Json; events: Json[] }> = ({ run, events }) => {
  const diff = planDiff(run, events);
  if (!diff) return null;
  const s = diff.summary ?? {};
  const total = (Object.keys(diff.groups) as DiffGroup[]).reduce((n, g) => n + diff.groups[g].length, 0);
  return (
    <section aria-labelledby="plan-h" id="plan">
      <h2 id="plan-h">{run.params?.destroy ? 'Destroy plan' : 'Plan'}</h2>
      <p class="plan-summary">
        <span class="diff-add">{Number(s.add ?? 0)} to add</span>, <span class="diff-change">{Number(s.change ?? 0)} to change</span>,{' '}
        <span class="diff-destroy">{Number(s.destroy ?? s.remove ?? 0)} to destroy</span>
      </p>
      {total === 0 ? (
        <p class="notice">No changes: the infrastructure matches the configuration.</p>
      ) : (
        <ul class="diff">
          {(Object.keys(diff.groups) as DiffGroup[]).flatMap((g) =>
            diff.groups[g].map((addr) => (
              <li class={`diff-${g}`}>
                <span class="sign" aria-hidden="true">
                  {GROUP_LABEL[g][0]}
                </span>
                <span class="mono">{addr}</span> <span class="hint">{GROUP_LABEL[g][1]}</span>
              </li>
            )),
          )}
        </ul>
      )}
    </section>
  );
};

const NodeTable: FC<{ run: Json; events: Json[] }> = ({ run, events }) => {
  const nodes = nodeProgress(run, events);
  if (!nodes.length) return null;
  return (
    <section aria-labelledby="nodes-h">
      <h2 id="nodes-h">Nodes</h2>
      <CardTable id="node-progress" columns={['Node', 'Role', 'Step', 'Time on node']}>
        {nodes.map((n) => (
          <tr class={n.level === 'error' ? 'row-error' : undefined}>
            <td data-label="Node">{n.node}</td>
            <td data-label="Role">{n.role ?? '—'}</td>
            <td data-label="Step">
              <span class={`badge ${n.level === 'error' ? 'failed' : n.done ? 'succeeded' : 'running'}`}>{n.step}</span>
            </td>
            <td data-label="Time on node">{formatDuration(n.elapsedMs)}</td>
          </tr>
        ))}
      </CardTable>
    </section>
  );
};

/** Everything that changes when the run ends; the live script swaps this block for a fresh copy. */
export const RunOutcome: FC<{ v: View; run: Json; events: Json[]; now: number }> = ({ v, run, events, now }) => {
  const rid = encodeURIComponent(run.id);
  const done = TERMINAL.has(run.state);
  const errorText = runErrorText(run, events);
  const diags = diagnostics(events);
  return (
    <div id="run-outcome" data-state={String(run.state)}>
      <dl class="facts">
        <dt>State</dt>
        <dd>
          <Badge state={String(run.state)} id="run-state" />
        </dd>
        <dt>Duration</dt>
        <dd id="run-duration">{formatDuration(runDuration(run, now))}</dd>
        <dt>Finished</dt>
        <dd id="run-finished">
          <Time ms={run.finishedAt} />
        </dd>
        {errorText && (
          <>
            <dt>Error</dt>
            <dd id="run-error">{errorText}</dd>
          </>
        )}
      </dl>
      {diags.length > 0 && (
        <section aria-labelledby="diag-h">
          <h2 id="diag-h">What went wrong</h2>
          <ul class="diagnostics">
            {diags.map((d) => (
              <li>
                <strong>{d.summary}</strong>
                {d.address && <span class="mono"> ({d.address})</span>}
                {d.detail && <p>{d.detail}</p>}
              </li>
            ))}
          </ul>
        </section>
      )}
      <div class="actions" id="run-actions">
        {!done && <ActionButton v={v} action={`/runs/${rid}/cancel`} label="Cancel run" kind="danger" id="cancel-run" />}
        {awaitsApproval(run) && <ActionButton v={v} action={`/runs/${rid}/approve`} label="Approve plan" id="approve-run" />}
        {done && run.state !== 'succeeded' && RETRYABLE.has(String(run.kind)) && (
          <ActionButton v={v} action={`/runs/${rid}/retry`} label="Retry" kind="secondary" id="retry-run" />
        )}
        {run.result?.planRun === undefined && run.kind === 'provision' && run.params?.planRun && (
          <a href={href(v, `/runs/${encodeURIComponent(run.params.planRun)}`)}>The approved plan</a>
        )}
      </div>
      <PlanDiff run={run} events={events} />
      <NodeTable run={run} events={events} />
      {done && run.result !== null && run.result !== undefined && run.kind !== 'provision' && (
        <details>
          <summary>Result (JSON)</summary>
          <pre>{JSON.stringify(run.result, null, 2)}</pre>
        </details>
      )}
    </div>
  );
};

const LogLine: FC<{ e: Json; id?: string | undefined }> = ({ e, id }) => (
  <li class={String(e.level)} data-seq={String(e.seq)} id={id}>
    <span class="at">{new Date(e.at).toISOString().slice(11, 19)}</span>
    <span class="level">{String(e.level)}</span>
    <span class="msg">{String(e.message)}</span>
  </li>
);

const eventCount = (n: number) => `${formatCount(n)} ${n === 1 ? 'event' : 'events'}`;

/** The count line's words; the page script says the same as it loads more. */
export function logCountText(shown: number, total: number): string {
  if (shown < total) return `Showing ${formatCount(shown)} of ${eventCount(total)}.`;
  return total === 1 ? 'Showing the one event.' : `Showing all ${eventCount(total)}.`;
}

/**
 * Where a finished run's first and last pages do not meet. The buttons work only with the page
 * script, which shows them; without it the count still says what is missing.
 */
const LogGap: FC<{ after: number; before: number }> = ({ after, before }) => {
  const missing = before - after - 1;
  const next = formatCount(Math.min(missing, EVENTS_PAGE_MAX));
  return (
    <li class="log-gap" id="log-gap" data-after={String(after)} data-before={String(before)} data-page={String(EVENTS_PAGE_MAX)}>
      <span id="log-gap-text">{eventCount(missing)} not shown.</span>
      <button type="button" class="secondary" id="log-more" aria-describedby="log-gap-text" hidden>
        Show {next} more
      </button>
      <button type="button" class="secondary" id="log-earlier" aria-describedby="log-gap-text" hidden>
        Show {next} earlier
      </button>
    </li>
  );
};

export const RunPage: FC<{ v: View; run: Json; log: RunLog; clusterName?: string; now: number; error?: string | undefined }> = ({ v, run, log, clusterName, now, error }) => {
  const rid = encodeURIComponent(run.id);
  const done = TERMINAL.has(run.state);
  const all = [...log.head, ...log.tail];
  const last = all.length ? Number(all.at(-1).seq) : 0;
  const headLast = log.head.length ? Number(log.head.at(-1).seq) : 0;
  const gap = log.tail.length > 0 && Number(log.tail[0].seq) > headLast + 1;
  const title = `${String(run.kind)}${run.kind === 'provision' && run.params?.mode ? ` (${String(run.params.mode)}${run.params.destroy ? ', destroy' : ''})` : ''}${clusterName ? ` · ${clusterName}` : ''}`;
  return (
    <Layout v={v} title={title} section="runs" error={error}>
      <dl class="facts">
        <dt>Run</dt>
        <dd class="mono">{String(run.id)}</dd>
        <dt>Cluster</dt>
        <dd>{run.cluster ? <a href={href(v, `/clusters/${encodeURIComponent(run.cluster)}`)}>{clusterName ?? String(run.cluster)}</a> : '—'}</dd>
        <dt>Started by</dt>
        <dd>{startedBy(run.createdBy)}</dd>
        <dt>Created</dt>
        <dd>
          <Time ms={run.createdAt} />
        </dd>
      </dl>
      <RunOutcome v={v} run={run} events={all} now={now} />
      <h2 id="log-h">Log</h2>
      <p id="run-live" class="hint" aria-live="polite">
        {done ? `Run ${run.state}.` : 'Loading the live log…'}
      </p>
      {log.total !== null && (
        <p class="log-count">
          <span id="log-count" aria-live="polite">
            {logCountText(all.length, log.total)}
          </span>
          {log.tail.length > 0 && (
            <>
              {' '}
              <a href="#log-end">Go to the last event</a>
            </>
          )}
        </p>
      )}
      <ol
        class="log"
        id="run-log"
        aria-labelledby="log-h"
        data-stream={href(v, `/runs/${rid}/events`)}
        data-after={String(last)}
        data-done={done ? '1' : '0'}
        data-total={log.total === null ? undefined : String(log.total)}
        data-scroll={done && run.state !== 'succeeded' ? 'end' : undefined}
      >
        {log.head.map((e) => (
          <LogLine e={e} />
        ))}
        {gap && <LogGap after={headLast} before={Number(log.tail[0].seq)} />}
        {log.tail.map((e, i) => (
          <LogLine e={e} id={i === log.tail.length - 1 ? 'log-end' : undefined} />
        ))}
      </ol>
      <script src={href(v, '/assets/run-log.js')} defer></script>
    </Layout>
  );
};

export const MessagePage: FC<{ v: View; title: string; message: string; status?: number }> = ({ v, title, message }) => (
  <Layout v={v} title={title} section="clusters" error={message}>
    <p>
      <a href={href(v, '/')}>Back to the clusters</a>
    </p>
  </Layout>
);

export const NotFoundPage: FC<{ v: View; what?: string }> = ({ v, what }) => (
  <Layout v={v} title="Page not found" section="none">
    <p class="notice" id="not-found">
      {what ?? 'There is nothing at this address.'} It may have been deleted, or the link may be mistyped.
    </p>
    <ul>
      <li>
        <a href={href(v, '/')}>Clusters</a>
      </li>
      <li>
        <a href={href(v, '/runs')}>Runs</a>
      </li>
    </ul>
  </Layout>
);
