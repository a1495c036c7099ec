// The tests' JSON caller of the RezusCloud API, over whatever carries the request: the Hono app in
// process, or fetch to a runner on a socket (in this process or a child). No app imports here, so
// a suite that only talks to a runner process does not load the app to get it.

// Response bodies are whatever the API sent; tests assert on their shape.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export type ApiCall = (
  method: string,
  path: string,
  opts?: { body?: unknown; token?: string | null; headers?: Record<string, string> },
) => Promise<{ status: number; body: Json; headers: Headers }>;

/** A JSON API caller over `send`: the admin token unless `token` says otherwise, and the body parsed when it is JSON. */
export function apiCaller(send: (path: string, init: RequestInit) => Response | Promise<Response>, adminToken: string): ApiCall {
  return async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...o.headers };
    const token = o.token === undefined ? adminToken : o.token;
    if (token) headers.authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (o.body !== undefined) {
      body = typeof o.body === 'string' ? o.body : JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await send(path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
}

/** The caller for a runner served over HTTP at `url`. */
export const httpCaller = (url: string, adminToken: string): ApiCall => apiCaller((path, init) => fetch(url + path, init), adminToken);
