// The one place a failure becomes an HTTP answer: the app's error handler answers with it, and a
// route that must know whether a request was refused (a 4xx) or failed (a 5xx) asks it the same.
import { isUniqueViolation } from '../db/errors.ts';
import { DomainError, type ProblemKind } from '../lib/errors.ts';
import { ApiError } from '../lib/http/errors.ts';
import { ActiveRunConflict } from '../lib/jobs/queue.ts';

const STATUS_OF = { invalid: 400, forbidden: 403, not_found: 404, conflict: 409, unavailable: 503 } as const satisfies Record<ProblemKind, number>;

/** The API error `err` is answered with, or undefined for an unexpected failure (a 500). */
export function toApiError(err: unknown): ApiError | undefined {
  if (err instanceof ApiError) return err;
  if (err instanceof DomainError) return new ApiError(STATUS_OF[err.kind], err.code, err.message, err.details);
  if (err instanceof ActiveRunConflict) return new ApiError(409, 'run_active', err.message, { activeRun: err.activeRunId });
  // Two requests racing to create one name: the unique index decided, the loser is told so.
  if (isUniqueViolation(err)) return new ApiError(409, 'conflict', 'that name is already taken');
  return undefined;
}

/** What the request asks for was refused (a 4xx), as opposed to a failure to act on it (a 5xx). */
export const isRefusal = (err: unknown): boolean => (toApiError(err)?.status ?? 500) < 500;
