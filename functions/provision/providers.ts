/** Providers a machine can be provisioned on with tofu; `metal` machines get a push instead. */
export const CLOUD_PROVIDERS = ['oci', 'openstack', 'hetzner', 'aws', 'local'] as const;
export type CloudProvider = (typeof CLOUD_PROVIDERS)[number];

/** Names a module block reserves; settings may not set them. */
export const RESERVED_SETTINGS = ['source', 'version', 'count', 'for_each', 'providers', 'depends_on', 'cluster_name', 'machines'];

export type SettingValue = string | number | boolean | string[] | Record<string, string>;
export type ProviderSettings = Partial<Record<CloudProvider, Record<string, SettingValue>>>;
