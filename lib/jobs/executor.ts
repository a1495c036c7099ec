import type { Run, RunEventInput } from './types.ts';

export interface RunContext<D> {
  run: Run;
  /** Aborted when the run is canceled or the runner shuts down; executors must stop promptly. */
  signal: AbortSignal;
  emit(event: RunEventInput): Promise<void>;
  deps: D;
}

/** Returns the run's result (stored as JSON); throwing fails the run with the error's message. */
export type Executor<D> = (ctx: RunContext<D>) => Promise<unknown>;

export type ExecutorRegistry<D> = Record<string, Executor<D>>;

/** An executor error whose message is meant for the run log as is. */
export class RunError extends Error {
  constructor(
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }
}
