import { and, eq, inArray } from 'drizzle-orm';
import { PROVIDER_CREDENTIAL_KINDS, providerCredentials, type CredentialProvider } from '../../db/schema/index.ts';
import type { Deps } from '../context.ts';
import { disallowedEnvName } from '../../lib/cloud/credential-env.ts';

export { PROVIDER_CREDENTIAL_KINDS, type CredentialProvider };

export const credentialContext = (tenantId: string, provider: CredentialProvider) => `creds:${tenantId}:${provider}`;

export class ProviderCredentialsMissing extends Error {
  constructor(readonly providers: CredentialProvider[]) {
    super(`no credentials stored for provider${providers.length > 1 ? 's' : ''}: ${providers.join(', ')}`);
  }
}

export async function storeProviderEnv(
  deps: Pick<Deps, 'db' | 'sealer' | 'clock'>,
  tenantId: string,
  provider: CredentialProvider,
  env: Record<string, string>,
): Promise<{ replaced: boolean }> {
  const now = deps.clock.now();
  const names = Object.keys(env).sort();
  const envSealed = deps.sealer.seal(JSON.stringify(env), credentialContext(tenantId, provider));
  const existing = await deps.db
    .select({ createdAt: providerCredentials.createdAt })
    .from(providerCredentials)
    .where(and(eq(providerCredentials.tenantId, tenantId), eq(providerCredentials.provider, provider)))
    .get();
  await deps.db
    .insert(providerCredentials)
    .values({ tenantId, provider, envSealed, names, createdAt: now, updatedAt: now })
    .onConflictDoUpdate({ target: [providerCredentials.tenantId, providerCredentials.provider], set: { envSealed, names, updatedAt: now } });
  return { replaced: existing !== undefined };
}

/**
 * The environment a tofu run for these providers needs, merged. Throws when a provider has no
 * credentials, or when two providers set the same variable (which one tofu sees would be luck).
 */
export async function loadProviderEnv(
  deps: Pick<Deps, 'db' | 'sealer'>,
  tenantId: string,
  providers: readonly CredentialProvider[],
): Promise<Record<string, string>> {
  const wanted = [...new Set(providers)];
  if (wanted.length === 0) return {};
  const rows = await deps.db
    .select()
    .from(providerCredentials)
    .where(and(eq(providerCredentials.tenantId, tenantId), inArray(providerCredentials.provider, wanted)));
  const missing = wanted.filter((p) => !rows.some((r) => r.provider === p));
  if (missing.length) throw new ProviderCredentialsMissing(missing);
  const env: Record<string, string> = {};
  const setBy: Record<string, string> = {};
  for (const row of rows) {
    const values = JSON.parse(deps.sealer.openText(row.envSealed, credentialContext(tenantId, row.provider))) as Record<string, string>;
    // Credentials stored before the allow-list existed must not reach tofu either.
    const bad = disallowedEnvName(row.provider, Object.keys(values));
    if (bad) throw new Error(`stored ${row.provider} credentials set ${bad}, which is not allowed; store them again`);
    for (const [name, value] of Object.entries(values)) {
      if (name in setBy) throw new Error(`providers ${setBy[name]} and ${row.provider} both set ${name}`);
      setBy[name] = row.provider;
      env[name] = value;
    }
  }
  return env;
}
