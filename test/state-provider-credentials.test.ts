import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProviderCredentialsMissing, loadProviderEnv } from '../functions/providers/credentials.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';

let h: Harness;
let ids: { tenantId: string; clusterId: string };
beforeEach(async () => {
  h = await createHarness();
  ids = await seedCluster(h, 'alpha');
});
afterEach(async () => h.close());

const SECRET = 'hcloud-token-value-7f3a9c';
const path = (p: string, tenant = ids.tenantId) => `/v1/tenants/${tenant}/providers${p}`;

describe('provider credentials', () => {
  it('sets, lists (names only), replaces and deletes; values never come back', async () => {
    const set = await h.call('PUT', path('/hetzner'), { body: { env: { HCLOUD_TOKEN: SECRET } } });
    expect(set.status).toBe(201);
    expect(set.body).toEqual({ provider: 'hetzner', names: ['HCLOUD_TOKEN'], replaced: false });
    await h.call('PUT', path('/aws'), { body: { env: { AWS_SECRET_ACCESS_KEY: 'aws-secret-1', AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE' } } });

    const list = await h.call('GET', path(''));
    expect(list.status).toBe(200);
    expect(list.body.providers.map((p: { provider: string; names: string[] }) => [p.provider, p.names])).toEqual([
      ['aws', ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']],
      ['hetzner', ['HCLOUD_TOKEN']],
    ]);
    expect(typeof list.body.providers[0].updatedAt).toBe('number');

    // An alternative endpoint would aim the runner's requests anywhere on the home network.
    const endpoint = await h.call('PUT', path('/hetzner'), { body: { env: { HCLOUD_TOKEN: 'new-token', HCLOUD_ENDPOINT: 'https://10.0.0.5' } } });
    expect(endpoint.status).toBe(400);
    expect(endpoint.body.error.message).toContain('HCLOUD_ENDPOINT');
    expect(await loadProviderEnv(h.deps, ids.tenantId, ['hetzner'])).toEqual({ HCLOUD_TOKEN: SECRET });
    // No process can be started with a NUL in its environment: refused here, not at every run.
    const nul = await h.call('PUT', path('/hetzner'), { body: { env: { HCLOUD_TOKEN: 'abc\u0000def' } } });
    expect(nul.status).toBe(400);
    expect(nul.body.error.message).toMatch(/NUL/);
    expect(JSON.stringify(nul.body)).not.toContain('abc');
    expect(await loadProviderEnv(h.deps, ids.tenantId, ['hetzner'])).toEqual({ HCLOUD_TOKEN: SECRET });

    const replaced = await h.call('PUT', path('/hetzner'), { body: { env: { HCLOUD_TOKEN: 'new-token' } } });
    expect(replaced.status).toBe(200);
    expect(replaced.body.replaced).toBe(true);
    expect(await loadProviderEnv(h.deps, ids.tenantId, ['hetzner'])).toEqual({ HCLOUD_TOKEN: 'new-token' });

    expect((await h.call('DELETE', path('/aws'))).status).toBe(204);
    expect((await h.call('DELETE', path('/aws'))).status).toBe(404);
    expect((await h.call('GET', path(''))).body.providers.map((p: { provider: string }) => p.provider)).toEqual(['hetzner']);

    const everything = JSON.stringify([set.body, list.body, replaced.body, (await h.call('GET', '/v1/audit')).body]);
    for (const v of [SECRET, 'new-token', 'aws-secret-1', 'AKIAEXAMPLE']) expect(everything).not.toContain(v);
    const rows = await h.deps.database.client.execute('SELECT * FROM provider_credentials');
    expect(JSON.stringify(rows.rows)).not.toContain('new-token');
    expect(everything).toContain('credentials.replace');
  });

  it('merges several providers for the executor and names the ones missing', async () => {
    await h.call('PUT', path('/hetzner'), { body: { env: { HCLOUD_TOKEN: SECRET } } });
    await h.call('PUT', path('/oci'), { body: { env: { OCI_TENANCY_OCID: 'ocid1.tenancy.oc1..x', OCI_PRIVATE_KEY: '-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----' } } });
    const env = await loadProviderEnv(h.deps, ids.tenantId, ['hetzner', 'oci']);
    expect(Object.keys(env).sort()).toEqual(['HCLOUD_TOKEN', 'OCI_PRIVATE_KEY', 'OCI_TENANCY_OCID']);
    expect(env.OCI_PRIVATE_KEY).toContain('\nabc\n');
    expect(await loadProviderEnv(h.deps, ids.tenantId, [])).toEqual({});

    const missing = loadProviderEnv(h.deps, ids.tenantId, ['hetzner', 'aws', 'openstack']);
    await expect(missing).rejects.toBeInstanceOf(ProviderCredentialsMissing);
    await expect(missing).rejects.toMatchObject({ providers: ['aws', 'openstack'] });
    await expect(missing).rejects.not.toThrow(SECRET);
  });

  it('refuses any variable the provider does not document, naming it, and stores nothing (tenant token)', async () => {
    const tok = (await h.call('POST', `/v1/tenants/${ids.tenantId}/tokens`, { body: { name: 't' } })).body.token;
    const hostile: Array<[string, string]> = [
      ['hetzner', 'TF_LOG'],
      ['hetzner', 'TF_LOG_PATH'],
      ['aws', 'TF_CLI_CONFIG_FILE'],
      ['aws', 'LD_PRELOAD'],
      ['oci', 'NODE_OPTIONS'],
      ['openstack', 'HTTPS_PROXY'],
      ['openstack', 'OS_CACERT'],
      ['aws', 'AWS_CA_BUNDLE'],
      ['aws', 'SSL_CERT_FILE'],
      ['oci', 'OCI_PRIVATE_KEY_PATH'],
      ['hetzner', 'PATH'],
      ['hetzner', 'HOME'],
      ['hetzner', 'AWS_ACCESS_KEY_ID'],
    ];
    for (const [provider, name] of hostile) {
      const good = provider === 'hetzner' ? { HCLOUD_TOKEN: SECRET } : provider === 'aws' ? { AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE' } : provider === 'oci' ? { OCI_REGION: 'eu-frankfurt-1' } : { OS_AUTH_URL: 'https://keystone.example.test' };
      const res = await h.call('PUT', path(`/${provider}`), { token: tok, body: { env: { ...good, [name]: '/tmp/pwned' } } });
      expect(res.status, `${provider} ${name}`).toBe(400);
      expect(res.body.error.message).toContain(name);
    }
    expect((await h.call('GET', path(''))).body.providers).toEqual([]);
    // Stored before the allow-list existed: the executor refuses it rather than pass it to tofu.
    const { storeProviderEnv } = await import('../functions/providers/credentials.ts');
    await storeProviderEnv(h.deps, ids.tenantId, 'hetzner', { HCLOUD_TOKEN: SECRET, TF_LOG_PATH: '/tmp/x' });
    await expect(loadProviderEnv(h.deps, ids.tenantId, ['hetzner'])).rejects.toThrow(/TF_LOG_PATH/);
  });

  it('keeps tenants apart', async () => {
    const other = await seedCluster(h, 'beta');
    await h.call('PUT', path('/hetzner', other.tenantId), { body: { env: { HCLOUD_TOKEN: 'beta-token' } } });
    const tok = (await h.call('POST', `/v1/tenants/${ids.tenantId}/tokens`, { body: { name: 't' } })).body.token;
    expect((await h.call('GET', path('', other.tenantId), { token: tok })).status).toBe(404);
    expect((await h.call('PUT', path('/hetzner', other.tenantId), { token: tok, body: { env: { HCLOUD_TOKEN: 'x' } } })).status).toBe(404);
    expect((await h.call('DELETE', path('/hetzner', other.tenantId), { token: tok })).status).toBe(404);
    expect((await h.call('GET', path(''), { token: tok })).body.providers).toEqual([]);
    await expect(loadProviderEnv(h.deps, ids.tenantId, ['hetzner'])).rejects.toBeInstanceOf(ProviderCredentialsMissing);
    expect(await loadProviderEnv(h.deps, other.tenantId, ['hetzner'])).toEqual({ HCLOUD_TOKEN: 'beta-token' });
    const reader = (await h.call('POST', `/v1/tenants/${ids.tenantId}/tokens`, { body: { name: 'r', scopes: ['read'] } })).body.token;
    expect((await h.call('PUT', path('/hetzner'), { token: reader, body: { env: { HCLOUD_TOKEN: 'x' } } })).status).toBe(403);
  });

  const bad: [string, string, unknown][] = [
    ['lowercase name', '/hetzner', { env: { hcloud_token: 'x' } }],
    ['name starting with a digit', '/hetzner', { env: { '1TOKEN': 'x' } }],
    ['name with a dash', '/hetzner', { env: { 'HCLOUD-TOKEN': 'x' } }],
    ['name with "="', '/hetzner', { env: { 'A=B': 'x' } }],
    ['non-string value', '/hetzner', { env: { HCLOUD_TOKEN: 42 } }],
    ['empty env', '/hetzner', { env: {} }],
    ['too many variables', '/hetzner', { env: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`V${i}`, 'x'])) }],
    ['value too long', '/hetzner', { env: { HCLOUD_TOKEN: 'x'.repeat(32 * 1024 + 1) } }],
    ['unknown field', '/hetzner', { env: { HCLOUD_TOKEN: 'x' }, extra: true }],
    ['unknown provider', '/metal', { env: { TOKEN: 'x' } }],
  ];
  it.each(bad)('%s → 400 and nothing stored', async (_label, provider, body) => {
    const res = await h.call('PUT', path(provider), { body });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
    expect((await h.call('GET', path(''))).body.providers).toEqual([]);
  });
});
