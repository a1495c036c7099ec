import { describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import { formatValue, niceTicks, renderChart } from '../functions/dashboard/chart.ts';
import { diagnostics, formatDuration, nodeProgress, planDiff, runErrorText, startedBy } from '../functions/dashboard/run-view.ts';
import { RunOutcome } from '../functions/dashboard/pages/runs.tsx';
import type { View } from '../functions/dashboard/view.ts';

const v: View = { base: '', csrf: 'c', principal: { tokenId: 'env-admin', tenantId: null, scopes: [], admin: true }, ingress: false };

async function renderOutcome(run: object, events: object[]) {
  const app = new Hono();
  app.get('/', (c) => c.html(<RunOutcome v={v} run={run} events={events} now={10_000} />));
  return (await app.request('/')).text();
}

describe('run view', () => {
  it('a failed provision shows what tofu said, not the name of the step', async () => {
    const run = { id: 'run_a', kind: 'provision', state: 'failed', params: { mode: 'plan' }, error: 'terraform providers failed (exit 1)', startedAt: 1000, finishedAt: 4000 };
    const events = [
      { seq: 1, level: 'info', type: 'provision.init', message: 'tofu init' },
      { seq: 2, level: 'error', type: 'tofu.diagnostic', message: 'Error: Invalid provider', data: { severity: 'error', summary: 'Invalid provider configuration', detail: 'The token is missing.', address: 'hcloud_server.cp1' } },
      { seq: 3, level: 'warn', type: 'tofu.diagnostic', message: 'Warning: deprecated', data: { severity: 'warning', summary: 'Deprecated attribute' } },
    ];
    expect(diagnostics(events)).toEqual([{ summary: 'Invalid provider configuration', detail: 'The token is missing.', address: 'hcloud_server.cp1' }]);
    expect(runErrorText(run, events)).toBe('Invalid provider configuration');
    expect(runErrorText(run, events.slice(0, 1))).toBe('terraform providers failed (exit 1)');
    const html = await renderOutcome(run, events);
    expect(html).toContain('<dd id="run-error">Invalid provider configuration</dd>');
    expect(html).not.toContain('terraform providers');
    expect(html).toContain('The token is missing.');
    // A failed run can be started again; it is over, so it cannot be canceled.
    expect(html).toContain('id="retry-run"');
    expect(html).not.toContain('id="cancel-run"');
    expect(html).toContain('<dd id="run-duration">3 s</dd>');
  });

  it('renders a plan as a diff of addresses, from the result or from the events', async () => {
    const run = {
      id: 'run_b',
      kind: 'provision',
      state: 'succeeded',
      params: { mode: 'plan' },
      result: {
        mode: 'plan',
        hasChanges: true,
        summary: { add: 1, change: 1, destroy: 1 },
        resources: [
          { address: 'a.new', action: 'create' },
          { address: 'b.edit', action: 'update' },
          { address: 'c.gone', action: 'delete' },
          { address: 'd.read', action: 'read' },
        ],
      },
    };
    expect(planDiff(run, [])!.groups).toEqual({ add: ['a.new'], change: ['b.edit'], replace: [], destroy: ['c.gone'] });
    const fromEvents = planDiff({ kind: 'provision', result: null }, [
      { type: 'tofu.planned_change', data: { address: 'x.y', action: 'replace' } },
      { type: 'provision.planned', data: { add: 1, change: 0, destroy: 1 } },
    ]);
    expect(fromEvents).toEqual({ summary: { add: 1, change: 0, destroy: 1 }, groups: { add: [], change: [], replace: ['x.y'], destroy: [] } });
    expect(planDiff({ kind: 'backup', result: { file: 'x' } }, [])).toBeNull();
    const html = await renderOutcome(run, []);
    expect(html).toContain('id="approve-run"');
    expect(html).toMatch(/<li class="diff-destroy"><span class="sign" aria-hidden="true">-<\/span><span class="mono">c\.gone<\/span>/);
    expect(html).not.toContain('d.read');
    // A plan without changes has nothing to approve.
    const none = await renderOutcome({ ...run, result: { ...run.result, hasChanges: false, resources: [], summary: { add: 0, change: 0, destroy: 0 } } }, []);
    expect(none).not.toContain('id="approve-run"');
    expect(none).toContain('No changes');
  });

  it('follows each node of an upgrade: its latest step and its time', () => {
    const run = { kind: 'upgrade' };
    const ev = (node: string, phase: string, elapsedMs: number, level = 'info') => ({ level, type: `upgrade.node.${phase}`, data: { node, role: 'worker', phase, elapsedMs } });
    expect(nodeProgress(run, [ev('w1', 'install', 1000), ev('w2', 'skip', 0), ev('w1', 'reboot', 65_000), ev('w1', 'failed', 70_000, 'error')])).toEqual([
      { node: 'w1', role: 'worker', step: 'failed', elapsedMs: 70_000, level: 'error', done: false },
      { node: 'w2', role: 'worker', step: 'skip', elapsedMs: 0, level: 'info', done: true },
    ]);
    expect(nodeProgress({ kind: 'backup' }, [ev('w1', 'install', 1)])).toEqual([]);
  });

  it('says who started a run and how long it took, in words', () => {
    expect(startedBy(null)).toBe('schedule');
    expect(startedBy('env-admin')).toBe('admin token');
    expect(startedBy('tok_abc')).toBe('token tok_abc');
    expect(formatDuration(59_400)).toBe('59 s');
    expect(formatDuration(61_000)).toBe('1 min 1 s');
    expect(formatDuration(3_720_000)).toBe('1 h 2 min');
    expect(formatDuration(null)).toBe('—');
  });
});

describe('charts', () => {
  it('formats values in their units and picks round ticks', () => {
    expect(formatValue(0.257, 'ratio')).toBe('26 %');
    expect(formatValue(1536 * 1024 * 1024, 'bytes')).toBe('1.5 GiB');
    expect(formatValue(512, 'bytes')).toBe('512 B');
    expect(formatValue(0.4213, 'plain')).toBe('0.42');
    expect(niceTicks(0, 0.93, 'plain')).toEqual([0, 0.5, 1]);
    expect(niceTicks(0, 0.55, 'plain')).toEqual([0, 0.2, 0.4, 0.6]);
    const gib = 1024 ** 3;
    expect(niceTicks(0, 1.3 * gib, 'bytes').map((t) => formatValue(t, 'bytes'))).toEqual(['0 B', '512 MiB', '1.0 GiB', '1.5 GiB']);
  });

  it('draws a line with value and time axes, or says there is no data', () => {
    const from = Date.UTC(2026, 0, 1, 10, 0);
    const to = from + 3_600_000;
    const svg = renderChart({ title: 'Memory in use', unit: 'bytes', from, to, points: [[from + 600_000, 100 * 1024 ** 2], [to, 300 * 1024 ** 2]] });
    expect(svg).toContain('aria-label="Memory in use: latest 300 MiB, min 100 MiB, max 300 MiB"');
    expect([...svg.matchAll(/<text class="tick"[^>]*>(\d\d:\d\d)<\/text>/g)].map((m) => m[1])).toEqual(['10:00', '10:15', '10:30', '10:45', '11:00']);
    expect(svg).toMatch(/<polyline class="line" points="[\d.]+,[\d.]+ 620,16"\/>/);
    const empty = renderChart({ title: 'CPU busy', unit: 'ratio', from, to, points: [] });
    expect(empty).toContain('no samples in this window');
    expect(empty).not.toContain('<polyline');
  });
});
