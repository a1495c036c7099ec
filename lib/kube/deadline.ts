// One time budget shared by every request of a collection. The AbortSignal cancels sockets; the
// race guarantees the caller gets its answer on time even if a layer below ignores the signal.
import { KubeApiError } from './errors.ts';

export interface Budget {
  signal: AbortSignal;
  /** Resolves with `work`, or rejects with a 'deadline' KubeApiError once the budget is spent. */
  bound<T>(endpoint: string, work: () => Promise<T>): Promise<T>;
  dispose(): void;
}

export function startBudget(deadlineMs: number, outer?: AbortSignal): Budget {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error('deadline')), Math.max(0, deadlineMs));
  const onOuter = (): void => controller.abort(new Error('aborted'));
  if (outer?.aborted) onOuter();
  else outer?.addEventListener('abort', onOuter, { once: true });
  const signal = controller.signal;

  const why = (endpoint: string): KubeApiError =>
    new KubeApiError(
      'deadline',
      outer?.aborted ? `${endpoint}: collection aborted by the caller` : `${endpoint}: no answer within the ${deadlineMs} ms deadline`,
    );

  return {
    signal,
    bound<T>(endpoint: string, work: () => Promise<T>): Promise<T> {
      if (signal.aborted) return Promise.reject(why(endpoint));
      return new Promise<T>((resolve, reject) => {
        const onAbort = (): void => reject(why(endpoint));
        signal.addEventListener('abort', onAbort, { once: true });
        work().then(
          (v) => {
            signal.removeEventListener('abort', onAbort);
            resolve(v);
          },
          (e: unknown) => {
            signal.removeEventListener('abort', onAbort);
            reject(signal.aborted ? why(endpoint) : e);
          },
        );
      });
    },
    dispose(): void {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onOuter);
    },
  };
}
