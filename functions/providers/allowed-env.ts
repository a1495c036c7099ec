import type { CredentialProvider } from '../../db/schema/index.ts';

/**
 * The environment variables each provider documents for credentials and endpoints, and nothing
 * else. Tofu runs as the runner's user, so a stored `TF_LOG_PATH`, `LD_PRELOAD`, `NODE_OPTIONS`,
 * proxy, CA bundle, `PATH` or `HOME` would let a tenant act on the host. Variables that name a
 * host file (OCI_PRIVATE_KEY_PATH, AWS_SHARED_CREDENTIALS_FILE, OS_CACERT, OS_CLOUD…) are left
 * out for the same reason: the provider would read a file of the runner's choosing.
 */
export const ALLOWED_PROVIDER_ENV: Readonly<Record<CredentialProvider, readonly string[]>> = {
  hetzner: ['HCLOUD_TOKEN', 'HCLOUD_ENDPOINT'],
  aws: ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_REGION', 'AWS_DEFAULT_REGION'],
  oci: ['OCI_TENANCY_OCID', 'OCI_USER_OCID', 'OCI_FINGERPRINT', 'OCI_PRIVATE_KEY', 'OCI_PRIVATE_KEY_PASSWORD', 'OCI_REGION'],
  openstack: [
    'OS_AUTH_URL',
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
    'OS_REGION_NAME',
    'OS_INTERFACE',
    'OS_IDENTITY_API_VERSION',
    'OS_APPLICATION_CREDENTIAL_ID',
    'OS_APPLICATION_CREDENTIAL_NAME',
    'OS_APPLICATION_CREDENTIAL_SECRET',
  ],
};

/** The first name in `names` the provider does not document, if any. */
export function disallowedEnvName(provider: CredentialProvider, names: Iterable<string>): string | undefined {
  const allowed = ALLOWED_PROVIDER_ENV[provider];
  for (const n of names) if (!allowed.includes(n)) return n;
  return undefined;
}
