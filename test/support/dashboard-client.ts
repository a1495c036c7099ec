/** Anything with Hono's `request`: the harness app, or a test's own. */
export interface Requester {
  request(input: string, init: RequestInit, env?: Record<PropertyKey, unknown>): Response | Promise<Response>;
}

/** A browser stand-in for app.request: keeps cookies, reads CSRF fields, posts forms. */
export class FormClient {
  readonly cookies = new Map<string, string>();
  lastSetCookie: string[] = [];

  constructor(
    private readonly app: Requester,
    private readonly opts: { origin?: string; headers?: Record<string, string>; env?: Record<string, unknown> } = {},
  ) {}

  private async send(method: string, path: string, body?: string, extra: Record<string, string> = {}) {
    const headers: Record<string, string> = { ...this.opts.headers, ...extra };
    if (this.cookies.size) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const res = await this.app.request(`${this.opts.origin ?? 'http://localhost'}${path}`, { method, headers, body }, this.opts.env);
    this.lastSetCookie = res.headers.getSetCookie();
    for (const line of this.lastSetCookie) {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      this.cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    return { status: res.status, text: await res.text(), headers: res.headers, location: res.headers.get('location') };
  }

  get(path: string, headers?: Record<string, string>) {
    return this.send('GET', path, undefined, headers);
  }

  post(path: string, form: Record<string, string | undefined>) {
    const body = new URLSearchParams(Object.entries(form).filter((e): e is [string, string] => e[1] !== undefined)).toString();
    return this.send('POST', path, body);
  }

  /** GETs a page, then posts a form to `action` with the CSRF value the page carried. */
  async submit(pagePath: string, action: string, form: Record<string, string | undefined>) {
    const page = await this.get(pagePath);
    return this.post(action, { _csrf: csrfOf(page.text), ...form });
  }

  async login(token: string) {
    const res = await this.submit('/login', '/login', { token });
    if (res.status !== 303) throw new Error(`login failed: ${res.status} ${res.text.slice(0, 200)}`);
    return res;
  }
}

export function csrfOf(html: string): string {
  const m = /name="_csrf" value="([^"]+)"/.exec(html);
  if (!m) throw new Error('page has no CSRF field');
  return m[1]!;
}

/** The text of the page's error alert, if any. */
export function alertOf(html: string): string | undefined {
  const m = /<div class="alert" role="alert"><strong>Error:<\/strong> ([^<]*)<\/div>/.exec(html) ?? /<p class="field-error"[^>]*role="alert">([^<]*)<\/p>/.exec(html);
  return m?.[1]?.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&').replace(/&lt;/g, '<').replace(/&gt;/g, '>');
}
