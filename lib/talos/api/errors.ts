import { GrpcStatus } from './grpc-status.ts';

export type TalosApiErrorCode =
  | 'unreachable'
  | 'connection-lost'
  | 'deadline'
  | 'canceled'
  | 'tls'
  | 'fingerprint-mismatch'
  /** The runner may not dial the address (REZUS_NODE_NETWORKS); nothing was sent. */
  | 'not-allowed'
  | 'unauthenticated'
  | 'permission-denied'
  | 'unimplemented'
  | 'invalid-argument'
  | 'failed-precondition'
  | 'already-exists'
  | 'not-found'
  | 'resource-exhausted'
  | 'node-error'
  | 'protocol'
  | 'internal';

/** Codes worth retrying later: the node may be rebooting, busy or briefly unreachable. */
const TRANSIENT: ReadonlySet<TalosApiErrorCode> = new Set(['unreachable', 'connection-lost', 'deadline', 'resource-exhausted']);

export class TalosApiError extends Error {
  override name = 'TalosApiError';
  readonly node: string;
  readonly code: TalosApiErrorCode;
  /** gRPC status name (e.g. `UNAVAILABLE`), or `OK` for a per-node error inside a successful reply. */
  readonly grpcStatus: string;
  readonly method: string;

  constructor(opts: { node: string; method: string; code: TalosApiErrorCode; grpcStatus: string; detail: string }) {
    super(`Talos API ${opts.method} on ${opts.node}: ${opts.code}: ${opts.detail}`);
    this.node = opts.node;
    this.method = opts.method;
    this.code = opts.code;
    this.grpcStatus = opts.grpcStatus;
  }

  get transient(): boolean {
    return TRANSIENT.has(this.code);
  }
}

export function isTalosApiError(err: unknown, code?: TalosApiErrorCode): err is TalosApiError {
  return err instanceof TalosApiError && (code === undefined || err.code === code);
}

/** True when the node does not know the RPC (older Talos): callers fall back to the legacy API. */
export function isUnimplemented(err: unknown): boolean {
  return isTalosApiError(err, 'unimplemented');
}

const BY_STATUS: Partial<Record<number, TalosApiErrorCode>> = {
  [GrpcStatus.DEADLINE_EXCEEDED]: 'deadline',
  [GrpcStatus.CANCELLED]: 'canceled',
  [GrpcStatus.UNAUTHENTICATED]: 'unauthenticated',
  [GrpcStatus.PERMISSION_DENIED]: 'permission-denied',
  [GrpcStatus.UNIMPLEMENTED]: 'unimplemented',
  [GrpcStatus.INVALID_ARGUMENT]: 'invalid-argument',
  [GrpcStatus.FAILED_PRECONDITION]: 'failed-precondition',
  [GrpcStatus.ALREADY_EXISTS]: 'already-exists',
  [GrpcStatus.NOT_FOUND]: 'not-found',
  [GrpcStatus.RESOURCE_EXHAUSTED]: 'resource-exhausted',
  // Sent by a node that answered: it is reachable, but the call did not go through (apid could not
  // reach the member it proxies to, or it is shutting down); transient either way.
  [GrpcStatus.UNAVAILABLE]: 'connection-lost',
};

export function codeForStatus(code: number): TalosApiErrorCode {
  return BY_STATUS[code] ?? 'internal';
}

const PEM_BLOCK = /-----BEGIN [^-]+-----[\s\S]*?(-----END [^-]+-----|$)/g;
const LONG_BASE64 = /[A-Za-z0-9+/=_-]{40,}/g;
const MAX_DETAIL = 300;

/**
 * Server messages can quote the config they rejected (YAML errors echo lines), so anything
 * that looks like key material or a long encoded blob is cut out before it reaches an error.
 */
export function sanitizeDetail(text: string): string {
  const cleaned = text.replace(PEM_BLOCK, '[pem redacted]').replace(LONG_BASE64, '[redacted]').replace(/\s+/g, ' ').trim();
  return cleaned.length > MAX_DETAIL ? `${cleaned.slice(0, MAX_DETAIL)}…` : cleaned;
}
