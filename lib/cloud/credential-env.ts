// The environment variables each provider's tofu run may be given (modules/README.md explains
// the choice). Left out on purpose: anything naming a file, profile or other endpoint on the
// runner, and every TF_VAR_* (it would set the root module's variables).
export const CREDENTIAL_ENV = {
  aws: ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN'],
  oci: ['OCI_TENANCY_OCID', 'OCI_USER_OCID', 'OCI_FINGERPRINT', 'OCI_PRIVATE_KEY', 'OCI_PRIVATE_KEY_PASSWORD', 'OCI_REGION'],
  openstack: [
    'OS_AUTH_URL',
    'OS_REGION_NAME',
    'OS_INTERFACE',
    'OS_USERNAME',
    'OS_USER_ID',
    'OS_PASSWORD',
    'OS_PROJECT_NAME',
    'OS_PROJECT_ID',
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
} as const satisfies Record<string, readonly string[]>;
