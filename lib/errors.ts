// Errors of the domain, free of HTTP: shared code (config rendering, secrets, the queue) says
// what went wrong; functions/app.ts maps the kind to a status once, and an executor turns the
// same error into a run failure.

export type ProblemKind = 'invalid' | 'not_found' | 'conflict' | 'forbidden' | 'unavailable';

/** A failure whose message is safe to show the caller as is. */
export class DomainError extends Error {
  override name = 'DomainError';
  constructor(
    readonly kind: ProblemKind,
    /** Stable machine-readable code, e.g. `invalid_config`. */
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** The message of anything thrown, for logs and run events. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
