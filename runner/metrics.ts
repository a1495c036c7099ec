// /metrics on the runner, with prom-client: request counters, run durations, process metrics, and
// at each scrape the run queue and the latest collect pass read from the database.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { healthFamilies } from '../functions/collect/metrics.ts';
import type { Deps } from '../functions/context.ts';
import type { Metrics } from '../functions/ops/http-metrics.ts';
import { RUN_STATES } from '../db/schema/index.ts';

export function createPromMetrics(deps: () => Pick<Deps, 'db' | 'jobs'>): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'rezus_' });
  const requests = new Counter({ name: 'rezus_http_requests_total', help: 'HTTP requests by route and status.', labelNames: ['method', 'route', 'status'], registers: [registry] });
  const durations = new Histogram({
    name: 'rezus_run_duration_seconds',
    help: 'How long runs took, from claim to their end, by kind and final state.',
    labelNames: ['kind', 'state'],
    // Runs span a backup (seconds) to a rolling upgrade (an hour).
    buckets: [0.5, 1, 5, 15, 60, 300, 900, 1800, 3600, 7200],
    registers: [registry],
  });
  new Gauge({
    name: 'rezus_runs',
    help: 'Runs by state.',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      const byState = await deps().jobs.countByState();
      for (const s of RUN_STATES) this.set({ state: s }, byState[s] ?? 0);
    },
  });
  // Families whose label sets come and go with machines: rebuilt from the database each scrape.
  const health = new Map<string, Gauge | Counter>();

  return {
    countRequest(method, route, status) {
      requests.inc({ method, route, status: String(status) });
    },
    runFinished(kind, state, seconds) {
      durations.observe({ kind, state }, seconds);
    },
    async render() {
      const families = await healthFamilies(deps());
      const seen = new Set<string>();
      for (const f of families) {
        seen.add(f.name);
        let metric = health.get(f.name);
        if (metric && (metric instanceof Counter) !== (f.type === 'counter')) {
          registry.removeSingleMetric(f.name);
          metric = undefined;
        }
        if (!metric) {
          const spec = { name: f.name, help: f.help, labelNames: f.labelNames, registers: [registry] };
          metric = f.type === 'counter' ? new Counter(spec) : new Gauge(spec);
          health.set(f.name, metric);
        }
        metric.reset();
        // A node's running total is exported as it was read: reset, then raised to the value.
        for (const s of f.samples) {
          if (metric instanceof Counter) metric.inc(s.labels, s.value);
          else metric.set(s.labels, s.value);
        }
      }
      for (const [name] of health) {
        if (!seen.has(name)) {
          registry.removeSingleMetric(name);
          health.delete(name);
        }
      }
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}
