// GENERATED from modules/*/main.tf by test/module-variables.test.ts (UPDATE_MODULE_VARIABLES=1 rewrites it).
// Portable: the HTTP handlers check providerSettings against it without reading the .tf files.

export type VariableType = 'string' | 'number' | 'bool' | 'list(string)' | 'list(number)' | 'map(string)';

export interface ModuleVariable {
  type: VariableType;
  /** No default: tofu stops with "No value for required variable" unless it is set. */
  required: boolean;
}

export const MODULE_VARIABLES: Record<string, Record<string, ModuleVariable>> = {
  aws: {
    default_image: { type: 'string', required: false },
    default_size: { type: 'string', required: false },
    enable_ipv6: { type: 'bool', required: true },
    image_arch: { type: 'string', required: false },
    public_ipv4: { type: 'bool', required: false },
    region: { type: 'string', required: true },
    root_volume_gb: { type: 'number', required: false },
    security_group_ids: { type: 'list(string)', required: false },
    subnet_id: { type: 'string', required: true },
    talos_version: { type: 'string', required: false },
  },
  hetzner: {
    default_image: { type: 'string', required: false },
    default_size: { type: 'string', required: false },
    enable_ipv4: { type: 'bool', required: false },
    firewall_ids: { type: 'list(number)', required: false },
    labels: { type: 'map(string)', required: false },
    location: { type: 'string', required: false },
    registry_mirror: { type: 'bool', required: false },
  },
  local: {
    apply_delay_seconds: { type: 'number', required: false },
  },
  oci: {
    availability_domain: { type: 'string', required: true },
    boot_volume_gb: { type: 'number', required: false },
    compartment_id: { type: 'string', required: true },
    default_image: { type: 'string', required: false },
    default_memory_gb: { type: 'number', required: false },
    default_ocpus: { type: 'number', required: false },
    default_size: { type: 'string', required: false },
    enable_ipv6: { type: 'bool', required: true },
    public_ipv4: { type: 'bool', required: false },
    subnet_id: { type: 'string', required: true },
  },
  openstack: {
    default_image: { type: 'string', required: false },
    default_size: { type: 'string', required: false },
    floating_ip: { type: 'bool', required: false },
    floating_ip_pool: { type: 'string', required: false },
    network_ids: { type: 'list(string)', required: true },
    security_groups: { type: 'list(string)', required: false },
  },
};
