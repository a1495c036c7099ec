import { DISPATCH_PRINCIPAL } from '../auth.ts';
import type { Principal } from '../context.ts';

/** Hands a request to the app's own router, as the given principal. */
export type Dispatch = (req: Request, env: Record<PropertyKey, unknown>) => Response | Promise<Response>;

// API bodies are JSON whose shape the page reads; errors are {error: {code, message}}.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export interface ApiResult {
  ok: boolean;
  status: number;
  body: Json;
  /** The API's message for a 4xx/5xx, safe to show. */
  error?: string;
}

export interface ApiClient {
  get(path: string): Promise<ApiResult>;
  send(method: 'POST' | 'PATCH' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<ApiResult>;
  /** The raw response, for streams. */
  raw(path: string, init: RequestInit): Promise<Response>;
}

/**
 * The dashboard's only way to read or change anything: the same /v1 handlers the API serves,
 * reached in-process, so validation, scoping and audit are exactly the API's.
 */
export function apiClient(dispatch: Dispatch, principal: Principal, signal?: AbortSignal): ApiClient {
  const env = { [DISPATCH_PRINCIPAL]: principal };
  const raw = async (path: string, init: RequestInit) =>
    dispatch(new Request(new URL(path, 'http://dashboard.internal'), { ...init, signal: init.signal ?? signal }), env);
  const call = async (method: string, path: string, body?: unknown): Promise<ApiResult> => {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await raw(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let parsed: Json;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = text;
    }
    const error = res.ok
      ? undefined
      : typeof parsed?.error?.message === 'string'
        ? parsed.error.message
        : `request failed (${res.status})`;
    return { ok: res.ok, status: res.status, body: parsed, ...(error ? { error } : {}) };
  };
  return {
    get: (path) => call('GET', path),
    send: (method, path, body) => call(method, path, body),
    raw,
  };
}

/** Run-creating endpoints answer `{run: {...}}` or the run itself. */
export function runIdOf(body: Json): string | undefined {
  const id = body?.run?.id ?? body?.id;
  return typeof id === 'string' && /^[a-z]+_[a-z2-7]+$/.test(id) ? id : undefined;
}
