import { CliError, EXIT } from './exit.ts';

/** The API refused a request: its `error.code` and `error.message` are what the user sees. */
export class ApiFailure extends CliError {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(EXIT.api, message);
  }
}

export interface RequestOptions {
  body?: unknown;
  query?: Record<string, string | number | undefined>;
  accept?: string;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

/** A thin client for the `/v1` API: bearer auth, JSON in and out, errors as {@link ApiFailure}. */
export class ApiClient {
  readonly baseUrl: string;
  constructor(
    url: string,
    private readonly token: string,
  ) {
    this.baseUrl = url.replace(/\/+$/, '');
  }

  url(path: string, query?: RequestOptions['query']): string {
    const u = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u.toString();
  }

  async raw(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, ...opts.headers };
    if (opts.accept) headers.accept = opts.accept;
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(opts.body);
    }
    let res: Response;
    try {
      res = await fetch(this.url(path, opts.query), { method, headers, body, signal: opts.signal });
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new CliError(EXIT.api, `cannot reach ${this.baseUrl}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
    }
    if (!res.ok) throw await failureOf(res, method, path);
    return res;
  }

  async json<T = Record<string, unknown>>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.raw(method, path, { accept: 'application/json', ...opts });
    if (res.status === 204) return undefined as T;
    return (await res.json()) as T;
  }

  async text(path: string, opts: RequestOptions = {}): Promise<string> {
    return (await this.raw('GET', path, opts)).text();
  }
}

async function failureOf(res: Response, method: string, path: string): Promise<ApiFailure> {
  const text = await res.text().catch(() => '');
  try {
    const { error } = JSON.parse(text) as { error?: { code?: string; message?: string; details?: unknown } };
    if (error?.message) return new ApiFailure(res.status, error.code ?? 'error', error.message, error.details);
  } catch {
    // not the API's JSON error shape (a proxy in between, say): report the status line instead
  }
  return new ApiFailure(res.status, 'http_error', `${method} ${path}: HTTP ${res.status} ${res.statusText}`.trim());
}
