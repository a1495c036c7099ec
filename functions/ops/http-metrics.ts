import { DomainError } from '../../lib/errors.ts';

/** A Prometheus exposition, ready to serve. */
export interface Exposition {
  contentType: string;
  body: string;
}

/**
 * What handlers and the worker record, and what /metrics serves. The runner backs it with
 * prom-client (runner/metrics.ts); a host without one (the Worker) serves no metrics.
 */
export interface Metrics {
  /** By matched route pattern (`/v1/clusters/:id`), never the raw path, to bound cardinality. */
  countRequest(method: string, route: string, status: number): void;
  runFinished(kind: string, state: string, seconds: number): void;
  render(): Promise<Exposition>;
}

export const noMetrics: Metrics = {
  countRequest() {},
  runFinished() {},
  render() {
    return Promise.reject(new DomainError('unavailable', 'metrics_at_home', 'metrics are served by the home runner'));
  },
};
