import { z } from 'zod';
import { checkProviderSettings } from '../../lib/cloud/provider-settings.ts';
import { ApiError } from '../../lib/http/errors.ts';
import { describeZodError } from '../../lib/http/validate.ts';
import { kubernetesRangeOf, kubernetesUnsupportedReason } from '../../lib/talos/k8s-compat.ts';
import { DEFAULT_KUBERNETES_VERSION, DEFAULT_TALOS_VERSION } from '../../lib/talos/versions.ts';
import { endpointSchema, kubernetesVersionSchema, talosVersionSchema } from '../../lib/talos/validate.ts';
import { clusterTalosInput, toClusterSettings } from '../machine-config/settings.ts';
import { CLOUD_PROVIDERS, RESERVED_SETTINGS, type SettingValue } from '../provision/providers.ts';

const TF_NAME = /^[a-z_][a-z0-9_]{0,63}$/;
/**
 * A key of a map setting (Hetzner's `labels`): letters, digits and `._/-`, which every map the
 * modules take allows, and never a `${` or `%{`, which tofu would read as a template in a key.
 */
const MAP_KEY = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,252}$/;
const mapSetting = z
  .record(z.string().regex(MAP_KEY, 'must be letters, digits and . _ / - (a label key)'), z.string().max(4096))
  .refine((o) => Object.keys(o).length <= 64, 'too many entries (64 at most)');
const scalarOrList = z.union([z.string().max(4096), z.number(), z.boolean(), z.array(z.string().max(4096)).max(64)]);
/** A map is checked as a map, so its errors name the entry (a union would only say "Invalid input"). */
const settingValue = z
  .custom<SettingValue>()
  .superRefine((v, ctx) => {
    const checked = (typeof v === 'object' && v !== null && !Array.isArray(v) ? mapSetting : scalarOrList).safeParse(v);
    for (const issue of checked.success ? [] : checked.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
  })
  // What the API document shows for it: the same shapes as the check.
  .meta({ anyOf: [z.toJSONSchema(scalarOrList), z.toJSONSchema(mapSetting)].map(({ $schema: _drop, ...rest }) => rest) });
/** Non-secret module variables per provider (region, subnet, image…); credentials go to /providers. */
const providerSettingsInput = z.partialRecord(
  z.enum(CLOUD_PROVIDERS),
  z.record(
    z.string().regex(TF_NAME, 'must be a tofu variable name').refine((k) => !RESERVED_SETTINGS.includes(k), 'is set by RezusCloud'),
    settingValue,
  ).refine((o) => Object.keys(o).length <= 64, 'too many settings'),
);

export const clusterSettingsInput = z.object({
  talosVersion: talosVersionSchema.default(DEFAULT_TALOS_VERSION),
  kubernetesVersion: kubernetesVersionSchema.default(DEFAULT_KUBERNETES_VERSION),
  endpoint: endpointSchema,
  ...clusterTalosInput.shape,
  providerSettings: providerSettingsInput.optional(),
});

/** What a PATCH may change: no defaults here, an absent field keeps its value. */
export const clusterUpdateInput = z.strictObject({
  kubernetesVersion: kubernetesVersionSchema.optional(),
  endpoint: endpointSchema.optional(),
  ...clusterTalosInput.shape,
  installerImage: clusterTalosInput.shape.installerImage.unwrap().nullable().optional(),
  providerSettings: providerSettingsInput.optional(),
});

/**
 * Talos refuses a config whose Kubernetes image tags are outside its support range, so a cluster
 * with such a pair could never boot. A Talos line the table does not know yet is not checked (as
 * for upgrades), and neither is the version the cluster already has: rows stored before this rule
 * must stay editable.
 */
function checkKubernetesSupported(talosVersion: string, kubernetesVersion: string, current?: string) {
  if (kubernetesVersion === current) return;
  const range = kubernetesRangeOf(talosVersion);
  const reason = range && kubernetesUnsupportedReason(talosVersion, kubernetesVersion);
  if (reason) throw new ApiError(400, 'invalid_request', `kubernetesVersion: ${reason}`, { supported: range });
}

/** `current`: the cluster's stored Kubernetes version, on a PATCH. */
export function validateClusterInput(body: z.output<typeof clusterSettingsInput>, current?: { kubernetesVersion: string }) {
  checkKubernetesSupported(body.talosVersion, body.kubernetesVersion, current?.kubernetesVersion);
  const settings = toClusterSettings(body);
  if ('error' in settings) throw new ApiError(400, 'invalid_request', describeZodError(settings.error));
  const problems = checkProviderSettings(body.providerSettings ?? {});
  if (problems.length) {
    throw new ApiError(400, 'invalid_request', problems.map((p) => `${p.path}: ${p.message}`).join('; '), { problems });
  }
  return {
    talosVersion: body.talosVersion,
    kubernetesVersion: body.kubernetesVersion,
    endpoint: body.endpoint,
    settings: { ...settings, providerSettings: body.providerSettings ?? {} } as Record<string, unknown>,
  };
}
