import { DIAL_NOT_ALLOWED } from '../talos/node-networks.ts';
import { errorMessage } from '../errors.ts';
// Failures of the Kubernetes collection, reduced to the few kinds a caller acts on. Messages name
// the endpoint (host and path) and the server's own status text; never headers, keys or tokens.

/** `not-allowed`: the runner may not dial the server's address (REZUS_NODE_NETWORKS); nothing was sent. */
export type KubeErrorCode = 'unreachable' | 'deadline' | 'unauthenticated' | 'forbidden' | 'tls' | 'http' | 'not-allowed';

export class KubeApiError extends Error {
  override readonly name = 'KubeApiError';
  constructor(
    readonly code: KubeErrorCode,
    message: string,
    /** HTTP status when the server answered. */
    readonly status?: number,
    /** The fields a 422's Status names (details.causes[].field), as `spec.selector`. */
    readonly fields: string[] = [],
    /** The server said a field may not change (a 422 whose message or a cause says so). */
    readonly immutable = false,
    /** How long the server asked to be left alone (its Retry-After), when it did. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

// TLS alerts the server sends when it refuses our client certificate: that is an identity
// problem (wrong CA, expired cert), not a transport one.
const CLIENT_CERT_REJECTED = /ALERT_(UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_REQUIRED|CERTIFICATE_EXPIRED|CERTIFICATE_REVOKED|CERTIFICATE_UNKNOWN|UNSUPPORTED_CERTIFICATE|ACCESS_DENIED|DECRYPT_ERROR|HANDSHAKE_FAILURE)/;
// Our own verification of the server certificate failing.
const SERVER_CERT_BAD = /^(UNABLE_TO_|SELF_SIGNED_CERT|DEPTH_ZERO_SELF_SIGNED_CERT|CERT_|ERR_TLS_CERT_ALTNAME_INVALID|ERR_SSL_|EPROTO|ERR_TLS_)/;
const UNREACHABLE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED', 'EADDRNOTAVAIL', 'UND_ERR_SOCKET']);

function causeCode(err: unknown): string | undefined {
  // An abort or a wrapping layer may carry the socket error as `cause`: follow it for the code.
  for (let e: unknown = err, i = 0; e && typeof e === 'object' && i < 4; e = (e as { cause?: unknown }).cause, i++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === 'string') return c;
  }
  return undefined;
}

function lowLevelText(err: unknown): string {
  return errorMessage(err).slice(0, 300);
}

/**
 * Answers the same request may not get a moment later: throttling (429, API Priority and Fairness)
 * and an apiserver, or the load balancer before it, failing or restarting (an upgrade restarts each).
 */
const TRANSIENT_STATUS = new Set([429, 500, 502, 503, 504]);

/**
 * A failure a wait may poll past: no answer (a reset connection, a restarting apiserver, a spent
 * per-request deadline) or a TRANSIENT_STATUS answer. Anything else (a refusal, a 404 where the
 * caller expects the object, a 422) would be answered the same way again.
 */
export function isTransient(err: unknown): err is KubeApiError {
  if (!(err instanceof KubeApiError)) return false;
  if (err.code === 'unreachable' || err.code === 'deadline') return true;
  return err.code === 'http' && err.status !== undefined && TRANSIENT_STATUS.has(err.status);
}

/** How long a failure's answer asked to be left alone (its Retry-After), 0 when it did not. */
export const retryAfterOf = (err: unknown): number => (err instanceof KubeApiError ? (err.retryAfterMs ?? 0) : 0);

/**
 * The pause before a wait's next read: its poll interval, or longer when the last failure asked
 * for more (a throttling or restarting apiserver's Retry-After), never past the `leftMs` the wait has.
 */
export const pauseBeforeNextRead = (pollMs: number, askedMs: number, leftMs: number): number => Math.max(0, Math.min(Math.max(pollMs, askedMs), leftMs));

/** Classifies a transport failure (no HTTP answer) for `endpoint`. */
export function transportError(endpoint: string, err: unknown): KubeApiError {
  const code = causeCode(err) ?? '';
  const text = lowLevelText(err);
  if (code === DIAL_NOT_ALLOWED) return new KubeApiError('not-allowed', `${endpoint}: ${text}`);
  if (CLIENT_CERT_REJECTED.test(code) || CLIENT_CERT_REJECTED.test(text.toUpperCase().replace(/ /g, '_'))) {
    return new KubeApiError('unauthenticated', `${endpoint}: client certificate rejected by the server (${text})`);
  }
  if (UNREACHABLE.has(code)) return new KubeApiError('unreachable', `${endpoint}: ${code} (${text})`);
  if (SERVER_CERT_BAD.test(code)) return new KubeApiError('tls', `${endpoint}: TLS failure ${code} (${text})`);
  return new KubeApiError('unreachable', `${endpoint}: ${text}`);
}

interface Status {
  message?: unknown;
  details?: { causes?: Array<{ field?: unknown; message?: unknown }> };
}

function parseStatus(body: unknown): Status | string {
  if (typeof body !== 'string') return body && typeof body === 'object' ? (body as Status) : {};
  try {
    const parsed: unknown = JSON.parse(body);
    return parsed && typeof parsed === 'object' ? (parsed as Status) : {};
  } catch {
    return body;
  }
}

/**
 * apimachinery's wording for a field that may not change (FieldImmutableErrorMsg, and the
 * Service's "may not change once set"), and what CEL and admission webhooks say for theirs.
 */
const IMMUTABLE = /is immutable|immutable field|may not change once set/i;

/** Classifies an HTTP answer with a non-success status for `endpoint`. */
export function httpError(endpoint: string, status: number, body: unknown, retryAfterMs?: number): KubeApiError {
  const st = parseStatus(body);
  const full = typeof st === 'string' ? st : typeof st.message === 'string' ? st.message : '';
  const detail = full.slice(0, 200);
  const suffix = detail ? `: ${detail}` : '';
  if (status === 422 && typeof st === 'object') {
    const causes = st.details?.causes ?? [];
    const fields = causes.map((c) => c.field).filter((f): f is string => typeof f === 'string');
    const immutable = IMMUTABLE.test(full) || causes.some((c) => typeof c.message === 'string' && IMMUTABLE.test(c.message));
    return new KubeApiError('http', `${endpoint}: HTTP ${status}${suffix}`, status, fields, immutable);
  }
  if (status === 401) return new KubeApiError('unauthenticated', `${endpoint}: 401 Unauthorized${suffix}`, status);
  if (status === 403) return new KubeApiError('forbidden', `${endpoint}: 403 Forbidden${suffix}`, status);
  return new KubeApiError('http', `${endpoint}: HTTP ${status}${suffix}`, status, [], false, retryAfterMs);
}
