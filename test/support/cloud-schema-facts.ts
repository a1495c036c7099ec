// Schema facts the cloud modules are held to, since no provider plugin can be downloaded here to
// validate them. Each entry says where it was read; /work/shared/ref/CLOUD-FACTS.md has the detail.
// Only names listed here may appear in a module's blocks of that type: a name a provider does
// not know fails `tofu validate` on a real account, which no test here could otherwise see.

export interface BlockFacts {
  /** Attribute and nested-block names the provider schema accepts (those the modules may use). */
  names: string[];
  /** Nested blocks and what they accept in turn. */
  blocks?: Record<string, BlockFacts>;
  source: string;
}

/** Meta-arguments Terraform itself accepts in every resource and data block. */
export const META_ARGUMENTS = ['count', 'for_each', 'provider', 'depends_on', 'lifecycle'];

export const PROVIDER_PINS: Record<string, { name: string; source: string; version: string; why: string }> = {
  aws: { name: 'aws', source: 'hashicorp/aws', version: '~> 6.0', why: 'v6 changed user_data state handling (version-6-upgrade guide); majors move only on purpose' },
  oci: { name: 'oci', source: 'oracle/oci', version: '~> 8.0', why: 'CHANGELOG: 6.0.0, 7.0.0, 8.0.0 within two years; >= 5.0 floated across three majors' },
  openstack: { name: 'openstack', source: 'terraform-provider-openstack/openstack', version: '~> 3.0', why: 'v3.0.0 removed the compute floating IP resources' },
  hetzner: { name: 'hcloud', source: 'hetznercloud/hcloud', version: '~> 1.45', why: 'read at v1.68.0; 1.x since the schema used here' },
};

export const RESOURCE_FACTS: Record<string, BlockFacts> = {
  aws_instance: {
    source: 'hashicorp/terraform-provider-aws internal/service/ec2/ec2_instance.go; docs r/instance',
    names: [
      'ami', 'instance_type', 'subnet_id', 'vpc_security_group_ids', 'associate_public_ip_address', 'ipv6_address_count',
      'user_data', 'user_data_base64', 'user_data_replace_on_change', 'metadata_options', 'root_block_device', 'tags',
    ],
    blocks: {
      metadata_options: {
        source: 'ec2_instance.go metadata_options; EC2 InstanceMetadataOptions (HttpProtocolIpv6 etc.)',
        names: ['http_endpoint', 'http_put_response_hop_limit', 'http_tokens', 'instance_metadata_tags', 'http_protocol_ipv6'],
      },
      root_block_device: { source: 'ec2_instance.go root_block_device', names: ['volume_size', 'volume_type', 'encrypted', 'delete_on_termination', 'iops', 'throughput'] },
    },
  },
  oci_core_instance: {
    source: 'oracle/terraform-provider-oci v8.28.0 internal/service/core/core_instance_resource.go',
    names: [
      'compartment_id', 'availability_domain', 'display_name', 'shape', 'shape_config', 'source_details', 'create_vnic_details',
      'metadata', 'freeform_tags', 'launch_options', 'instance_options', 'agent_config',
    ],
    blocks: {
      shape_config: { source: 'core_instance_resource.go shape_config (TypeFloat)', names: ['ocpus', 'memory_in_gbs'] },
      source_details: { source: 'core_instance_resource.go source_details', names: ['source_type', 'source_id', 'boot_volume_size_in_gbs'] },
      create_vnic_details: { source: 'core_instance_resource.go create_vnic_details (assign_public_ip TypeString)', names: ['subnet_id', 'assign_public_ip', 'assign_ipv6ip'] },
      launch_options: {
        source: 'siderolabs/contrib examples/terraform/oci/instances.tf; Talos oracle.mdx image_metadata.json',
        names: ['network_type', 'boot_volume_type', 'remote_data_volume_type', 'firmware'],
      },
      instance_options: { source: 'siderolabs/contrib examples/terraform/oci/instances.tf', names: ['are_legacy_imds_endpoints_disabled'] },
      agent_config: { source: 'siderolabs/contrib examples/terraform/oci/instances.tf', names: ['are_all_plugins_disabled', 'is_management_disabled', 'is_monitoring_disabled'] },
    },
  },
  openstack_compute_instance_v2: {
    source: 'terraform-provider-openstack v3.4.0 openstack/resource_openstack_compute_instance_v2.go',
    names: ['name', 'flavor_name', 'image_id', 'availability_zone', 'security_groups', 'user_data', 'config_drive', 'metadata', 'network'],
    blocks: { network: { source: 'resource_openstack_compute_instance_v2.go network', names: ['uuid', 'name', 'port', 'fixed_ip_v4', 'fixed_ip_v6', 'access_network'] } },
  },
  openstack_networking_floatingip_v2: {
    source: 'terraform-provider-openstack v3.4.0 resource_openstack_networking_floatingip_v2.go',
    names: ['pool', 'description', 'address', 'port_id', 'subnet_id', 'tags'],
  },
  openstack_networking_floatingip_associate_v2: {
    source: 'terraform-provider-openstack v3.4.0 resource_openstack_networking_floatingip_associate_v2.go',
    names: ['floating_ip', 'port_id', 'fixed_ip'],
  },
  hcloud_server: {
    source: 'hetznercloud/terraform-provider-hcloud v1.68.0 internal/server/resource.go',
    names: ['name', 'server_type', 'image', 'location', 'user_data', 'firewall_ids', 'labels', 'public_net'],
    blocks: { public_net: { source: 'internal/server/resource.go public_net', names: ['ipv4_enabled', 'ipv6_enabled', 'ipv4', 'ipv6'] } },
  },
};

export const DATA_FACTS: Record<string, BlockFacts> = {
  aws_ami: {
    source: 'hashicorp/terraform-provider-aws docs d/ami; siderolabs/contrib examples/terraform/aws',
    names: ['owners', 'most_recent', 'name_regex', 'filter'],
    blocks: { filter: { source: 'docs d/ami filter', names: ['name', 'values'] } },
  },
  oci_core_vnic_attachments: { source: 'oracle/terraform-provider-oci d/core_vnic_attachments', names: ['compartment_id', 'instance_id'] },
  oci_core_vnic: { source: 'oracle/terraform-provider-oci d/core_vnic', names: ['vnic_id'] },
  openstack_networking_port_v2: {
    source: 'terraform-provider-openstack data_source_openstack_networking_port_v2.go',
    names: ['device_id', 'network_id', 'port_id', 'name', 'fixed_ip'],
  },
};

/** Nova's metadata key pattern (openstack/nova nova/api/validation/parameter_types.py): no "/". */
export const NOVA_METADATA_KEY = /^[a-zA-Z0-9-_:. ]{1,255}$/;

/** Server types Hetzner no longer sells: cx22 deprecated 2025-10-16, removed Jan 2026 (docs.hetzner.cloud changelog). */
export const HETZNER_REMOVED_TYPES = ['cx22'];

/** Sidero Labs' AWS account that publishes the official Talos AMIs (siderolabs/contrib aws example). */
export const TALOS_AMI_OWNER = '540036508848';
