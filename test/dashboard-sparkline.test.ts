import { describe, expect, it } from 'vitest';
import { apiHealthView, parseHealthReport, shortReason, UNKNOWN_REPORT, type HealthContext } from '../functions/dashboard/health-view.ts';
import { renderSparkline, sparklinePoints } from '../functions/dashboard/sparkline.ts';
import { silentLogger } from '../lib/log.ts';

const pointsOf = (svg: string) =>
  /points="([^"]+)"/
    .exec(svg)![1]!
    .split(' ')
    .map((p) => p.split(',').map(Number) as [number, number]);

describe('sparkline renderer', () => {
  it('puts the oldest value left, the newest right, the largest at the top and the smallest at the bottom', () => {
    const pts = sparklinePoints([5, 10, 0, 7.5], 100, 20);
    expect(pts.map(([x]) => x)).toEqual([2, 34, 66, 98]);
    expect(pts.map(([, y]) => y)).toEqual([10, 2, 18, 6]);
  });

  it('renders an accessible SVG whose polyline matches the points and marks the latest value', () => {
    const svg = renderSparkline([3, 1, 4, 1, 5], { label: 'CPU load', width: 60, height: 20 });
    expect(svg.startsWith('<svg class="sparkline"')).toBe(true);
    expect(svg).toContain('width="60" height="20" viewBox="0 0 60 20" role="img"');
    expect(svg).toContain('aria-label="CPU load: latest 5, min 1, max 5"');
    expect(svg).toContain('<title>CPU load: latest 5, min 1, max 5</title>');
    expect(pointsOf(svg)).toEqual(sparklinePoints([3, 1, 4, 1, 5], 60, 20));
    expect(svg).toContain('<circle cx="58" cy="2"');
  });

  it('draws a flat series and a single value across the middle', () => {
    expect(sparklinePoints([4, 4, 4], 50, 10).map(([, y]) => y)).toEqual([5, 5, 5]);
    expect(sparklinePoints([9], 50, 10)).toEqual([[25, 5]]);
  });

  it('skips values that are not finite, keeps only the newest maxPoints, and formats the summary', () => {
    const svg = renderSparkline([1, Number.NaN, 2, Number.POSITIVE_INFINITY, 3, 4], { label: 'x', maxPoints: 3, format: (v) => `${v}%` });
    expect(pointsOf(svg)).toHaveLength(3);
    expect(svg).toContain('aria-label="x: latest 4%, min 2%, max 4%"');
  });

  it('says "no data" for an empty series instead of drawing a line', () => {
    const svg = renderSparkline([Number.NaN], { label: 'mem' });
    expect(svg).not.toContain('<polyline');
    expect(svg).toContain('aria-label="mem: no data"');
    expect(svg).toContain('class="sparkline-empty"');
  });

  it('escapes the label', () => {
    const svg = renderSparkline([1, 2], { label: '<b>"x" & y</b>' });
    expect(svg).not.toContain('<b>');
    expect(svg).toContain('&lt;b&gt;&quot;x&quot; &amp; y&lt;/b&gt;');
  });
});

describe('health view', () => {
  it('cuts a node error to its first line, without the library boilerplate or the resolution note', () => {
    const raw =
      'cp1: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp [2001:db8::10]:50000: connect: connection refused"\nResolution note: check the node is up';
    expect(shortReason(raw)).toBe('cp1: connection error: desc = "transport: Error while dialing: dial tcp [2001:db8::10]:50000: connect: connection refused"');
    expect(shortReason('etcd reports: slow disk Resolution note: see the docs')).toBe('etcd reports: slow disk');
    const long = shortReason('x'.repeat(500));
    expect(long).toHaveLength(140);
    expect(long.endsWith('…')).toBe(true);
  });

  it('reads the health API body defensively', () => {
    expect(parseHealthReport(null)).toEqual(UNKNOWN_REPORT);
    expect(parseHealthReport({ state: 'on fire' })).toEqual({ cluster: { status: 'unknown' }, machines: {} });
    expect(
      parseHealthReport({
        state: 'degraded',
        reasons: ['etcd has 2/3 members', 'w1: NotReady for 5m'],
        checkedAt: 1000,
        machines: [
          { id: 'm_a', state: 'unreachable', lastSeenAt: 900 },
          { id: 'm_b', lastSeenAt: 'yesterday' },
        ],
      }),
    ).toEqual({
      cluster: { status: 'degraded', summary: 'etcd has 2/3 members (+1 more)', reasons: ['etcd has 2/3 members', 'w1: NotReady for 5m'], checkedAt: 1000 },
      machines: { m_a: { status: 'unreachable', lastSeen: 900 }, m_b: { status: 'unknown' } },
    });
  });

  it('the API-backed view is unknown when the health route answers an error, and draws the sample series', async () => {
    const answers: Record<string, { status: number; body: unknown }> = {};
    const ctx = {
      deps: { log: silentLogger, clock: { now: () => 10 * 3_600_000 } },
      principal: { tokenId: 't', tenantId: null, scopes: [], admin: true },
      get: async (path: string) => answers[path.replace(/since=\d+/, 'since=S')] ?? { status: 404, body: { error: { code: 'not_found', message: 'cluster not found' } } },
    } as unknown as HealthContext;
    expect(await apiHealthView.report(ctx, 'cl_x')).toEqual(UNKNOWN_REPORT);
    answers['/v1/clusters/cl_x/health'] = { status: 200, body: { state: 'healthy', reasons: [], machines: [{ id: 'm_1', state: 'healthy', lastSeenAt: 5 }] } };
    answers['/v1/clusters/cl_x/machines/m_1/samples?metric=load.1&since=S'] = { status: 200, body: { points: [{ value: 0.5 }, { value: 1.5 }] } };
    answers['/v1/clusters/cl_x/machines/m_1/samples?metric=memory.used_bytes&since=S'] = { status: 200, body: { points: [{ avg: 100 }, { value: 200 }] } };
    expect(await apiHealthView.report(ctx, 'cl_x')).toEqual({
      cluster: { status: 'healthy' },
      machines: { m_1: { status: 'healthy', lastSeen: 5, samples: [0.5, 1.5], samplesLabel: 'load', memory: [100, 200] } },
    });
  });
});
