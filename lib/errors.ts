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

/** The message of anything thrown, for logs and run events; SQL parameter dumps are cut off. */
export function errorMessage(err: unknown): string {
  return withoutSqlParams(err instanceof Error ? err.message : String(err));
}

/**
 * Drizzle puts every bound value of a failed query into its message (`params: …`): sealed
 * secrets, state bodies, token hashes. Logs and run errors keep the query, never the values.
 */
export function withoutSqlParams(text: string): string {
  const at = text.search(/\n\s*params:/);
  return at === -1 ? text : `${text.slice(0, at)}\n[query parameters omitted]`;
}
