import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** An error with an HTTP status and a stable code; its message is safe to show the caller. */
export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export const badRequest = (message: string, details?: Record<string, unknown>) =>
  new ApiError(400, 'invalid_request', message, details);
export const notFound = (what: string) => new ApiError(404, 'not_found', `${what} not found`);
export const conflict = (message: string, details?: Record<string, unknown>) =>
  new ApiError(409, 'conflict', message, details);

export function errorBody(err: ApiError) {
  return { error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) } };
}
