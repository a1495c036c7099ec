// prom-client (with the OpenTelemetry API it loads for its process metrics) took about a tenth of
// the runner's start-up CPU, yet nothing reads a metric before the first scrape. So the runner
// starts with this stand-in: it keeps what is recorded meanwhile (request counts by label, run durations) and
// hands it to the real metrics once they are loaded, at the first scrape or shortly after
// the start, whichever comes first, so the process metrics (GC, event-loop lag) start soon too.
import type { Metrics } from '../functions/ops/http-metrics.ts';

export interface DeferredMetrics extends Metrics {
  /** Loads the real metrics now (idempotent); resolves when they record directly. */
  load(): Promise<Metrics>;
  /** Cancels the timed load (shutdown); a pending scrape still loads. */
  stop(): void;
}

export function deferredMetrics(load: () => Promise<Metrics>, opts: { loadAfterMs: number; onError: (err: unknown) => void }): DeferredMetrics {
  let real: Metrics | undefined;
  let loading: Promise<Metrics> | undefined;
  // Same route and status → one counter, as in prom-client, so this stays as small as its labels.
  const requests = new Map<string, { method: string; route: string; status: number; n: number }>();
  const runs: { kind: string; state: string; seconds: number }[] = [];

  const ensure = (): Promise<Metrics> =>
    (loading ??= load().then((m) => {
      for (const r of requests.values()) for (let i = 0; i < r.n; i++) m.countRequest(r.method, r.route, r.status);
      for (const r of runs) m.runFinished(r.kind, r.state, r.seconds);
      requests.clear();
      runs.length = 0;
      real = m;
      return m;
    }, (err: unknown) => {
      // The next scrape tries again.
      loading = undefined;
      throw err;
    }));
  const timer = setTimeout(() => ensure().catch(opts.onError), opts.loadAfterMs);
  // A waiting load never holds the process open.
  timer.unref();

  return {
    countRequest(method, route, status) {
      if (real) return real.countRequest(method, route, status);
      const key = `${method} ${status} ${route}`;
      const seen = requests.get(key);
      if (seen) seen.n++;
      else requests.set(key, { method, route, status, n: 1 });
    },
    runFinished(kind, state, seconds) {
      if (real) return real.runFinished(kind, state, seconds);
      runs.push({ kind, state, seconds });
    },
    async render() {
      return (await ensure()).render();
    },
    load: ensure,
    stop() {
      clearTimeout(timer);
    },
  };
}
