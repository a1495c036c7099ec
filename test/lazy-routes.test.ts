// createApp mounts only the probes; the rest of the routes are imported and mounted by the first
// request no probe answers (functions/app.ts). That request, and any racing it, must be answered
// exactly as by an eagerly mounted app: same auth, body limit, 404s, and one count per request.
import { afterEach, describe, expect, it } from 'vitest';
import { mountRoutesNow } from '../functions/app.ts';
import { createHarness, type Harness } from './support/harness.ts';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const apiRoutes = (x: Harness) => x.app.routes.filter((r) => r.path.startsWith('/v1/'));

/** The request counter's samples, by their labels. */
async function requestCounts(x: Harness): Promise<Map<string, number>> {
  const { body } = await x.deps.metrics.render();
  const out = new Map<string, number>();
  for (const m of body.matchAll(/^rezus_http_requests_total\{method="([^"]+)",route="([^"]+)",status="(\d+)"\} (\d+)$/gm)) out.set(`${m[1]} ${m[2]} ${m[3]}`, Number(m[4]));
  return out;
}

describe('routes mounted on first use', () => {
  it('serves the probes without mounting the API', async () => {
    h = await createHarness();
    expect(apiRoutes(h)).toEqual([]);
    expect((await h.call('GET', '/readyz', { token: null })).status).toBe(200);
    expect((await h.call('GET', '/healthz', { token: null })).body).toEqual({ status: 'ok' });
    expect(apiRoutes(h)).toEqual([]);
  });

  it('answers its first request with the API auth, then serves the mounted routes', async () => {
    h = await createHarness();
    const refused = await h.call('GET', '/v1/tenants', { token: null });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBeTypeOf('string');
    expect(apiRoutes(h).some((r) => r.method === 'GET' && r.path === '/v1/clusters/:id')).toBe(true);
    const created = await h.call('POST', '/v1/tenants', { body: { name: 'home' } });
    expect(created.status).toBe(201);
    expect((await h.call('GET', '/v1/tenants')).body.tenants.map((t: { name: string }) => t.name)).toEqual(['home']);
  });

  it('answers an unknown first path with the JSON 404, after the API auth under /v1', async () => {
    h = await createHarness();
    expect((await h.call('GET', '/v1/no-such-thing', { token: null })).status).toBe(401);
    const missing = await h.call('GET', '/v1/no-such-thing');
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ error: { code: 'not_found', message: 'no such route' } });
    const elsewhere = await h.call('GET', '/no/such/page.txt', { token: null });
    expect(elsewhere.status).toBe(404);
  });

  it('answers requests racing the mount each once: body limit, validation, state backend auth, counted once by route', async () => {
    h = await createHarness();
    const [big, bad, list, state] = await Promise.all([
      h.call('POST', '/v1/tenants', { body: JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }) }),
      h.call('POST', '/v1/tenants', { body: { name: 42 } }),
      h.call('GET', '/v1/tenants'),
      // Tofu's backend takes basic auth, not the API's bearer token: the /v1 middleware must not run.
      h.call('GET', '/v1/state/tn_nope/cl_nope', { token: null, headers: { authorization: `Basic ${Buffer.from('x:y').toString('base64')}` } }),
    ]);
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe('body_too_large');
    expect(bad.status).toBe(400);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ tenants: [] });
    // The backend's own refusal (it asks for basic auth), not the bearer check of the /v1 API.
    expect(state.status).toBe(401);
    expect(state.headers.get('www-authenticate')).toMatch(/^Basic/);
    expect(state.body.error.message).not.toMatch(/bearer/);
    const counts = await requestCounts(h);
    expect(counts.get('GET /v1/tenants 200')).toBe(1);
    expect(counts.get('POST /v1/tenants 400')).toBe(1);
    expect(counts.get('POST /v1/tenants 413')).toBe(1);
  });
});

describe('mountRoutesNow', () => {
  it('mounts without a request, once, and requests then go straight to the routes', async () => {
    h = await createHarness();
    await Promise.all([mountRoutesNow(h.app), mountRoutesNow(h.app)]);
    const count = h.app.routes.length;
    expect(apiRoutes(h).some((r) => r.method === 'POST' && r.path === '/v1/tenants')).toBe(true);
    expect((await h.call('POST', '/v1/tenants', { body: { name: 'home' } })).status).toBe(201);
    await mountRoutesNow(h.app);
    expect(h.app.routes.length).toBe(count);
    expect((await requestCounts(h)).get('POST /v1/tenants 201')).toBe(1);
  });
});
