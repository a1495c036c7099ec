import { setMaxListeners } from 'node:events';
import type { Run, RunEventInput } from './types.ts';

export interface EmitOptions {
  /**
   * For high-volume streams nobody awaits (tofu's log lines): the event may be stored up to
   * ~100 ms later, in one commit with its neighbours. Order is kept, and the run ends only after
   * it is stored.
   */
  defer?: boolean;
}

export interface RunContext<D> {
  run: Run;
  /** Aborted when the run is canceled or the runner shuts down; executors must stop promptly. */
  signal: AbortSignal;
  emit(event: RunEventInput, opts?: EmitOptions): Promise<void>;
  deps: D;
}

/** Returns the run's result (stored as JSON); throwing fails the run with the error's message. */
export type Executor<D> = (ctx: RunContext<D>) => Promise<unknown>;

export type ExecutorRegistry<D> = Record<string, Executor<D>>;

/** An executor of one job spec: it gets the run's params already parsed by the spec's schema. */
export type JobExecutor<D, P> = (ctx: RunContext<D>, params: P) => Promise<unknown>;

/** An executor error whose message is meant for the run log as is. */
export class RunError extends Error {
  constructor(
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export type StopReason = 'cancel' | 'shutdown' | 'lease-lost';

/** The reason a worker aborts a run's signal with, so an executor can tell a cancel from a shutdown. */
export class RunAbort extends Error {
  constructor(
    readonly reason: StopReason,
    /**
     * How long the run has left to stop, when the aborter cannot wait longer (a shutdown, whose
     * whole time is bounded). Code that gives a child a grace period reads it duck-typed from
     * `signal.reason` and keeps within it; a cancel has none and waits the full grace.
     */
    readonly stopWithinMs?: number,
  ) {
    super(reason === 'cancel' ? 'canceled' : reason === 'shutdown' ? 'runner shutting down' : 'lease lost');
  }
}

/** Why the run's signal was aborted, if it was by a worker. */
export function stopReason(signal: AbortSignal): StopReason | undefined {
  return signal.aborted && signal.reason instanceof RunAbort ? signal.reason.reason : undefined;
}

/**
 * A signal that follows the run's except for a cancel: rolling work lets the step in flight
 * finish on a cancel, and stops at once on a shutdown or a lost lease.
 */
export function abortedUnlessCanceled(signal: AbortSignal): AbortSignal {
  const c = new AbortController();
  // Every concurrent call of a step listens on it.
  setMaxListeners(0, c.signal);
  const follow = (): void => {
    if (stopReason(signal) !== 'cancel') c.abort(signal.reason);
  };
  if (signal.aborted) follow();
  else signal.addEventListener('abort', follow, { once: true });
  return c.signal;
}
