// gRPC status codes as the wire carries them (grpc-status trailer), from the gRPC spec's
// "Status codes and their use"; names as upstream's codes package spells them.
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

export type GrpcStatusCode = (typeof GrpcStatus)[keyof typeof GrpcStatus];

const NAMES = new Map<number, string>(Object.entries(GrpcStatus).map(([name, code]) => [code, name]));

export function grpcStatusName(code: number): string {
  return NAMES.get(code) ?? `CODE_${code}`;
}

/**
 * A reply that is not gRPC at all (a proxy's error page, a wrong port) carries an HTTP status
 * only; the spec's "HTTP to gRPC Status Code Mapping" turns it into a gRPC one.
 */
export function statusForHttp(httpStatus: number): GrpcStatusCode {
  switch (httpStatus) {
    case 400:
      return GrpcStatus.INTERNAL;
    case 401:
      return GrpcStatus.UNAUTHENTICATED;
    case 403:
      return GrpcStatus.PERMISSION_DENIED;
    case 404:
      return GrpcStatus.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return GrpcStatus.UNAVAILABLE;
    default:
      return GrpcStatus.UNKNOWN;
  }
}
