import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isApiPath, UNDOCUMENTED_METHODS } from '../functions/openapi/operations.ts';
import { FormClient } from './support/dashboard-client.ts';
import { createHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

type Doc = { paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Record<string, unknown> }> }; security?: unknown[] }>> };

async function fetchDoc(): Promise<Doc> {
  const res = await h.app.request('/openapi.json');
  expect(res.status).toBe(200);
  return (await res.json()) as Doc;
}

describe('OpenAPI description', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const doc = await fetchDoc();
    const result = await new Validator().validate(doc as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('describes every API route the app serves, and nothing it does not', async () => {
    const doc = await fetchDoc();
    const served = new Set(
      h.app.routes
        .filter((r) => r.method !== 'ALL' && !UNDOCUMENTED_METHODS.has(r.method) && isApiPath(r.path) && r.path !== '/openapi.json')
        .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:([A-Za-z]+)/g, '{$1}')}`),
    );
    const described = new Set(Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`)));
    expect([...served].filter((k) => !described.has(k)).sort()).toEqual([]);
    expect([...described].filter((k) => !served.has(k)).sort()).toEqual([]);
  });

  it('carries the schemas the handlers validate with', async () => {
    const doc = await fetchDoc();
    const createTenant = doc.paths['/v1/tenants']!.post!.requestBody!.content['application/json']!.schema;
    expect(createTenant).toMatchObject({ type: 'object', required: ['name'], additionalProperties: false });
    // The handler refuses what the description forbids.
    const res = await h.call('POST', '/v1/tenants', { body: { name: 'ok', extra: 1 } });
    expect(res.status).toBe(400);
    const provision = doc.paths['/v1/clusters/{id}/provision']!.post!.requestBody!.content['application/json']!.schema as { properties: Record<string, { enum?: string[] }> };
    expect(provision.properties.mode!.enum).toEqual(['plan', 'apply']);
    expect(doc.paths['/v1/hooks/{tenant}/provision']!.post!.security).toEqual([{ webhookSignature: [] }]);
  });

  it('is listed in the dashboard as a reference page', async () => {
    const b = new FormClient(h.app);
    expect((await b.get('/api')).status).toBe(303); // signed out: to the login first
    await b.login(h.adminToken);
    const page = await b.get('/api');
    expect(page.status).toBe(200);
    expect(page.text).toContain('/v1/clusters/:id/provision');
    expect(page.text).toContain('Queue a tofu plan, apply or destroy');
  });
});
