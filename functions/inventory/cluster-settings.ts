import { z } from 'zod';
import type { Sealer } from '../../lib/crypto/seal.ts';

// Replaced by lib/talos/validate once config generation lands; kept strict meanwhile.
const version = z.string().regex(/^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/, 'must be a version like v1.13.9');
const endpoint = z
  .string()
  .refine((v) => {
    try {
      const u = new URL(v);
      return u.protocol === 'https:' && u.port !== '' && (u.pathname === '/' || u.pathname === '') && !u.search;
    } catch {
      return false;
    }
  }, 'must be https://host:port');

export const clusterSettingsInput = z.object({
  talosVersion: version,
  kubernetesVersion: version,
  endpoint,
});

export function validateClusterInput(body: z.output<typeof clusterSettingsInput>) {
  const talosVersion = body.talosVersion.startsWith('v') ? body.talosVersion : `v${body.talosVersion}`;
  return {
    talosVersion,
    kubernetesVersion: body.kubernetesVersion.replace(/^v/, ''),
    endpoint: body.endpoint,
    settings: {} as Record<string, unknown>,
  };
}

export async function sealedClusterSecrets(_sealer: Sealer, _clusterId: string): Promise<string | null> {
  return null;
}
