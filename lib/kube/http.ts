// The whole Kubernetes client the runner needs: JSON over HTTPS to the API server, on a keep-alive
// agent carrying the kubeconfig's CA and client identity. Every call the runner makes (list
// nodes, read readyz, cordon, evict, patch a DaemonSet) is one plain REST request, so a generated
// client and its object graph would cost tens of megabytes for nothing.
import https from 'node:https';
import { createSecureContext } from 'node:tls';
import type { DialGuard } from '../dial-guard.ts';
import type { KubeTarget } from './kubeconfig.ts';

export interface KubeResponse {
  status: number;
  /** Parsed JSON, or the text when the answer is not JSON (readyz, some proxies' errors). */
  body: unknown;
  text: string;
  /** The answer's Retry-After as ms from now; absent when there was none, or none readable. */
  retryAfterMs?: number;
}

/**
 * A Retry-After value (RFC 9110: delay-seconds or an HTTP date) as ms from `nowMs`. The apiserver
 * sends one with API Priority and Fairness' 429s and with an eviction refused while a disruption
 * budget is still being processed (10 s); a budget that allows no disruption sends none.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  const v = value?.trim();
  if (!v) return undefined;
  if (/^\d{1,9}$/.test(v)) return Number(v) * 1000;
  // An HTTP date names its day or month; Date.parse would also take '-5' as a year.
  if (!/[A-Za-z]{3}/.test(v)) return undefined;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

export interface KubeRequestOptions {
  body?: unknown;
  /** For PATCH: application/merge-patch+json or application/strategic-merge-patch+json. */
  contentType?: string;
  accept?: string;
  signal?: AbortSignal;
}

/**
 * An agent that dials only inside the guard's networks: an IP literal outside them fails the
 * request before any connection, a name is checked on what it resolves to.
 */
class GuardedAgent extends https.Agent {
  constructor(
    options: https.AgentOptions,
    private readonly guard: DialGuard,
  ) {
    super(options);
  }

  override createConnection(options: https.RequestOptions & { host?: string }, callback: (err: Error | null, socket?: unknown) => void): ReturnType<https.Agent['createConnection']> {
    const refused = this.guard.refusal(options.host ?? '');
    if (refused) {
      callback(refused);
      return undefined as unknown as ReturnType<https.Agent['createConnection']>;
    }
    return super.createConnection({ ...options, lookup: this.guard.lookup }, callback);
  }
}

/**
 * A keep-alive agent for the target. The TLS context is built once here: an agent given PEMs
 * builds one, parsing every key and certificate, for each connection it opens.
 */
export function kubeAgent(target: KubeTarget, opts: { idleMs?: number; maxSockets?: number; guard?: DialGuard | undefined } = {}): https.Agent {
  const secureContext = createSecureContext({
    ...(target.ca ? { ca: target.ca } : {}),
    ...(target.cert ? { cert: target.cert } : {}),
    ...(target.key ? { key: target.key } : {}),
  });
  const options: https.AgentOptions = {
    keepAlive: true,
    secureContext,
    rejectUnauthorized: !target.insecure,
    ...(target.servername ? { servername: target.servername } : {}),
    ...(opts.idleMs ? { timeout: opts.idleMs } : {}),
    ...(opts.maxSockets ? { maxSockets: opts.maxSockets } : {}),
  };
  return opts.guard ? new GuardedAgent(options, opts.guard) : new https.Agent(options);
}

/**
 * One request. Resolves with any HTTP answer (callers decide what a status means); rejects with
 * the transport's own error (for errors.ts's transportError) when there is none.
 */
export function kubeRequest(
  conn: { target: KubeTarget; agent: https.Agent },
  method: string,
  path: string,
  opts: KubeRequestOptions = {},
): Promise<KubeResponse> {
  const { target } = conn;
  const payload = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${target.server}${path}`,
      {
        method,
        agent: conn.agent,
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(target.servername ? { servername: target.servername } : {}),
        headers: {
          accept: opts.accept ?? 'application/json',
          ...(target.authorization ? { authorization: target.authorization } : {}),
          ...(payload ? { 'content-type': opts.contentType ?? 'application/json', 'content-length': String(payload.length) } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        // A connection cut mid-body ends the stream without 'end'; settle rather than hang.
        res.on('close', () => {
          if (!res.complete) reject(new Error('connection closed before the answer was complete'));
        });
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown = text;
          if (text.length > 0 && (text[0] === '{' || text[0] === '[')) {
            try {
              body = JSON.parse(text);
            } catch {
              // Not JSON after all: keep the text for the error message.
            }
          }
          const retryAfterMs = parseRetryAfter(res.headers['retry-after'], Date.now());
          resolve({ status: res.statusCode ?? 0, body, text, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
