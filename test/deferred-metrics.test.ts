// The runner starts without prom-client (runner/deferred-metrics.ts): what is recorded before the
// real metrics load must reach them, once each, and a scrape loads them at once.
import { describe, expect, it } from 'vitest';
import type { Metrics } from '../functions/ops/http-metrics.ts';
import { createPromMetrics } from '../runner/metrics.ts';
import { deferredMetrics } from '../runner/deferred-metrics.ts';
import { createHarness } from './support/harness.ts';

const noError = (err: unknown) => {
  throw err;
};

describe('deferred metrics', () => {
  it('hands what was recorded before the load to prom-client, counted once, and records directly after', async () => {
    const h = await createHarness();
    try {
      let loads = 0;
      const m = deferredMetrics(
        async () => {
          loads++;
          return createPromMetrics(() => h.deps);
        },
        { loadAfterMs: 60_000, onError: noError },
      );
      for (let i = 0; i < 3; i++) m.countRequest('GET', '/v1/runs/:id', 200);
      m.countRequest('GET', '/v1/runs/:id', 404);
      m.runFinished('collect', 'succeeded', 2);
      expect(loads).toBe(0);
      const first = (await m.render()).body;
      expect(first).toContain('rezus_http_requests_total{method="GET",route="/v1/runs/:id",status="200"} 3');
      expect(first).toContain('rezus_http_requests_total{method="GET",route="/v1/runs/:id",status="404"} 1');
      expect(first).toMatch(/^rezus_run_duration_seconds_count\{kind="collect",state="succeeded"\} 1$/m);
      m.countRequest('GET', '/v1/runs/:id', 200);
      const second = (await m.render()).body;
      expect(second).toContain('rezus_http_requests_total{method="GET",route="/v1/runs/:id",status="200"} 4');
      expect(loads).toBe(1);
      m.stop();
    } finally {
      await h.close();
    }
  });

  it('loads by itself after the delay, and tries again at the next scrape when a load failed', async () => {
    const recorded: string[] = [];
    const real: Metrics = {
      countRequest: (method, route, status) => void recorded.push(`${method} ${route} ${status}`),
      runFinished: () => {},
      render: async () => ({ contentType: 'text/plain', body: recorded.join('\n') }),
    };
    let attempts = 0;
    const errors: unknown[] = [];
    const m = deferredMetrics(
      async () => {
        if (++attempts === 1) throw new Error('first load fails');
        return real;
      },
      { loadAfterMs: 10, onError: (err) => errors.push(err) },
    );
    m.countRequest('GET', '/healthz', 200);
    for (let i = 0; i < 100 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(errors).toHaveLength(1);
    expect(recorded).toEqual([]);
    expect((await m.render()).body).toBe('GET /healthz 200');
    expect(attempts).toBe(2);
    m.countRequest('POST', '/v1/collect', 202);
    expect(recorded).toEqual(['GET /healthz 200', 'POST /v1/collect 202']);
    m.stop();
  });
});
