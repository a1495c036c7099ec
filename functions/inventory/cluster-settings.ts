import { z } from 'zod';
import { ApiError } from '../../lib/http/errors.ts';
import { describeZodError } from '../../lib/http/validate.ts';
import { DEFAULT_KUBERNETES_VERSION, DEFAULT_TALOS_VERSION } from '../../lib/talos/versions.ts';
import { endpointSchema, kubernetesVersionSchema, talosVersionSchema } from '../../lib/talos/validate.ts';
import { clusterTalosInput, toClusterSettings } from '../machine-config/settings.ts';

export const clusterSettingsInput = z.object({
  talosVersion: talosVersionSchema.default(DEFAULT_TALOS_VERSION),
  kubernetesVersion: kubernetesVersionSchema.default(DEFAULT_KUBERNETES_VERSION),
  endpoint: endpointSchema,
  ...clusterTalosInput.shape,
});

export function validateClusterInput(body: z.output<typeof clusterSettingsInput>) {
  const settings = toClusterSettings(body);
  if ('error' in settings) throw new ApiError(400, 'invalid_request', describeZodError(settings.error));
  return {
    talosVersion: body.talosVersion,
    kubernetesVersion: body.kubernetesVersion,
    endpoint: body.endpoint,
    settings: settings as unknown as Record<string, unknown>,
  };
}
