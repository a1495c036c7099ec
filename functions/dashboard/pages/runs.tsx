import type { FC } from 'hono/jsx';
import type { Json } from '../api.ts';
import { ActionButton, Badge, Layout, Time } from '../layout.tsx';
import { href, type View } from '../view.ts';
import { RunsTable } from './runs-table.tsx';

export const RunsPage: FC<{ v: View; runs: Json[]; error?: string | undefined }> = ({ v, runs, error }) => (
  <Layout v={v} title="Runs" section="runs" error={error}>
    {v.principal?.admin && (
      <div class="actions">
        <ActionButton v={v} action="/backups" label="Start backup" />
      </div>
    )}
    <h2>Recent runs</h2>
    <RunsTable v={v} runs={runs} />
  </Layout>
);

const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'interrupted']);

/** Plan runs wait for a person to approve them; the approve API decides whether this one can be. */
export function awaitsApproval(run: Json): boolean {
  return run.kind === 'provision' && run.params?.mode === 'plan' && run.state === 'succeeded' && run.result?.approved !== true;
}

export const RunPage: FC<{ v: View; run: Json; events: Json[]; error?: string | undefined }> = ({ v, run, events, error }) => {
  const rid = encodeURIComponent(run.id);
  const done = TERMINAL.has(run.state);
  const last = events.length ? Number(events.at(-1).seq) : 0;
  return (
    <Layout v={v} title={`Run ${run.id}`} section="runs" error={error}>
      <dl class="facts">
        <dt>Kind</dt>
        <dd>{String(run.kind)}</dd>
        <dt>State</dt>
        <dd>
          <Badge state={String(run.state)} id="run-state" />
        </dd>
        <dt>Cluster</dt>
        <dd class="mono">{run.cluster ? <a href={href(v, `/clusters/${encodeURIComponent(run.cluster)}`)}>{String(run.cluster)}</a> : '—'}</dd>
        <dt>Created</dt>
        <dd>
          <Time ms={run.createdAt} />
        </dd>
        <dt>Started</dt>
        <dd>
          <Time ms={run.startedAt} />
        </dd>
        <dt>Finished</dt>
        <dd id="run-finished">
          <Time ms={run.finishedAt} />
        </dd>
        {run.error && (
          <>
            <dt>Error</dt>
            <dd>{String(run.error)}</dd>
          </>
        )}
      </dl>
      <div class="actions">
        {!done && <ActionButton v={v} action={`/runs/${rid}/cancel`} label="Cancel run" kind="danger" id="cancel-run" />}
        {awaitsApproval(run) && <ActionButton v={v} action={`/runs/${rid}/approve`} label="Approve plan" />}
      </div>
      <h2 id="log-h">Log</h2>
      <p id="run-live" class="hint" aria-live="polite">
        {done ? `Run ${run.state}.` : 'Loading the live log…'}
      </p>
      <ol class="log" id="run-log" aria-labelledby="log-h" data-stream={href(v, `/runs/${rid}/events`)} data-after={String(last)} data-done={done ? '1' : '0'}>
        {events.map((e) => (
          <li class={String(e.level)} data-seq={String(e.seq)}>
            <span class="at">{new Date(e.at).toISOString().slice(11, 19)}</span>
            <span class="level">{String(e.level)}</span>
            <span class="msg">{String(e.message)}</span>
          </li>
        ))}
      </ol>
      {run.result !== null && run.result !== undefined && (
        <>
          <h2>Result</h2>
          <pre>{JSON.stringify(run.result, null, 2)}</pre>
        </>
      )}
      <script src={href(v, '/assets/run-log.js')} defer></script>
    </Layout>
  );
};

export const MessagePage: FC<{ v: View; title: string; message: string }> = ({ v, title, message }) => (
  <Layout v={v} title={title} section="clusters" error={message}>
    <p>
      <a href={href(v, '/')}>Back to the clusters</a>
    </p>
  </Layout>
);

