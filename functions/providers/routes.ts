import { and, eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { providerCredentials } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { ApiError, notFound } from '../../lib/http/errors.ts';
import { parseWith, readJson } from '../../lib/http/validate.ts';
import { recordAudit } from '../audit/record.ts';
import type { AppEnv } from '../context.ts';
import { loadTenant } from '../inventory/load.ts';
import { PROVIDER_CREDENTIAL_KINDS, storeProviderEnv } from './credentials.ts';
import { CREDENTIAL_ENV, disallowedEnvName } from '../../lib/cloud/credential-env.ts';

export const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;
const MAX_VARS = 64;
// PEM keys (OCI API keys, service account JSON) are the largest values a provider takes.
const MAX_VALUE_CHARS = 32 * 1024;

const envName = z.string().max(128, 'variable names are at most 128 characters').regex(ENV_NAME, 'must be an environment variable name like OCI_TENANCY_OCID');
export const putCredentials = z.strictObject({
  env: z
    .record(
      envName,
      z
        .string()
        .max(MAX_VALUE_CHARS, `values are at most ${MAX_VALUE_CHARS} characters`)
        // An environment value cannot hold NUL: tofu could never be started with it.
        .refine((v) => !v.includes('\0'), 'values cannot contain a NUL character'),
    )
    .refine((e) => Object.keys(e).length > 0, 'must set at least one variable')
    .refine((e) => Object.keys(e).length <= MAX_VARS, `at most ${MAX_VARS} variables`),
});
const providerParam = z.enum(PROVIDER_CREDENTIAL_KINDS, { message: `provider must be one of ${PROVIDER_CREDENTIAL_KINDS.join(', ')}` });

/** Cloud credentials per tenant. Values go in and are never read back through the API. */
export function providerCredentialRoutes() {
  const app = new Hono<AppEnv>();

  app.put('/:tenant/providers/:provider', requireScope('write'), async (c) => {
    const tenant = await loadTenant(c, c.req.param('tenant'));
    const provider = parseWith(providerParam, c.req.param('provider'));
    const body = await readJson(c, putCredentials);
    const bad = disallowedEnvName(provider, Object.keys(body.env));
    if (bad) {
      throw new ApiError(400, 'invalid_request', `env.${bad}: ${provider} credentials may set only ${CREDENTIAL_ENV[provider].join(', ')}`, { field: `env.${bad}` });
    }
    const { replaced } = await storeProviderEnv(c.var.deps, tenant.id, provider, body.env);
    const names = Object.keys(body.env).sort();
    await recordAudit(c, { action: replaced ? 'credentials.replace' : 'credentials.set', target: `${tenant.id}/${provider}`, tenantId: tenant.id, detail: { provider, names } });
    return c.json({ provider, names, replaced }, replaced ? 200 : 201);
  });

  app.get('/:tenant/providers', requireScope('read'), async (c) => {
    const tenant = await loadTenant(c, c.req.param('tenant'));
    const rows = await c.var.deps.db
      .select({ provider: providerCredentials.provider, names: providerCredentials.names, createdAt: providerCredentials.createdAt, updatedAt: providerCredentials.updatedAt })
      .from(providerCredentials)
      .where(eq(providerCredentials.tenantId, tenant.id))
      .orderBy(providerCredentials.provider);
    return c.json({ providers: rows });
  });

  app.delete('/:tenant/providers/:provider', requireScope('write'), async (c) => {
    const tenant = await loadTenant(c, c.req.param('tenant'));
    const provider = parseWith(providerParam, c.req.param('provider'));
    const gone = await c.var.deps.db
      .delete(providerCredentials)
      .where(and(eq(providerCredentials.tenantId, tenant.id), eq(providerCredentials.provider, provider)))
      .returning({ provider: providerCredentials.provider });
    if (!gone.length) throw notFound(`${provider} credentials`);
    await recordAudit(c, { action: 'credentials.delete', target: `${tenant.id}/${provider}`, tenantId: tenant.id, detail: { provider } });
    return c.body(null, 204);
  });

  return app;
}
