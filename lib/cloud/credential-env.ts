import type { CredentialProvider } from '../../db/schema/index.ts';

/**
 * The environment variables each provider's tofu run may be given: credentials and what selects
 * them, nothing else (modules/README.md holds the same table, and a test keeps the two equal).
 * Tofu runs as the runner's user, so a stored `TF_LOG_PATH`, `LD_PRELOAD`, `NODE_OPTIONS`, proxy,
 * CA bundle, `PATH` or `HOME` would let a tenant act on the host. Left out on purpose: names that
 * point the provider at a host file or profile (`OCI_PRIVATE_KEY_PATH`, `AWS_SHARED_CREDENTIALS_FILE`,
 * `OS_CACERT`, `OS_CLOUD`…), alternative API endpoints other than OpenStack's own auth URL
 * (`HCLOUD_ENDPOINT` would aim the runner's requests anywhere on the home network), region
 * variables the modules take as settings, and every `TF_VAR_*` (it would set the root module's
 * variables).
 */
export const CREDENTIAL_ENV = {
  aws: ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN'],
  oci: ['OCI_TENANCY_OCID', 'OCI_USER_OCID', 'OCI_FINGERPRINT', 'OCI_PRIVATE_KEY', 'OCI_PRIVATE_KEY_PASSWORD', 'OCI_REGION'],
  openstack: [
    'OS_AUTH_URL',
    'OS_REGION_NAME',
    'OS_INTERFACE',
    'OS_IDENTITY_API_VERSION',
    'OS_USERNAME',
    'OS_USER_ID',
    'OS_PASSWORD',
    'OS_TOKEN',
    'OS_PROJECT_NAME',
    'OS_PROJECT_ID',
    'OS_TENANT_NAME',
    'OS_TENANT_ID',
    'OS_USER_DOMAIN_NAME',
    'OS_USER_DOMAIN_ID',
    'OS_PROJECT_DOMAIN_NAME',
    'OS_PROJECT_DOMAIN_ID',
    'OS_DOMAIN_NAME',
    'OS_DOMAIN_ID',
    'OS_APPLICATION_CREDENTIAL_ID',
    'OS_APPLICATION_CREDENTIAL_NAME',
    'OS_APPLICATION_CREDENTIAL_SECRET',
  ],
  hetzner: ['HCLOUD_TOKEN'],
} as const satisfies Readonly<Record<CredentialProvider, readonly string[]>>;

/** The first name in `names` the provider's list does not hold, if any. */
export function disallowedEnvName(provider: CredentialProvider, names: Iterable<string>): string | undefined {
  const allowed: readonly string[] = CREDENTIAL_ENV[provider];
  for (const n of names) if (!allowed.includes(n)) return n;
  return undefined;
}
