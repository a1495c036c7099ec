import type { SecureContext } from 'node:tls';
import { createTalosClient, createTalosSecureContext, type TalosApiClient } from '../../lib/talos/api/index.ts';
import { kubeAdminCredentials, renderKubeconfig, talosAdminCredentials, type ClientCredentials } from '../../lib/talos/clientconfig.ts';
import type { Deps } from '../deps.ts';
import type { ClusterRow, MachineRow } from '../inventory/load.ts';
import { openClusterSecrets } from './secrets.ts';

/**
 * Where RezusCloud reaches a machine's Talos API: the address the user gave (it may carry a port
 * forward), else the IPv6 tofu reported (v1 reaches nodes directly over IPv6), else its IPv4.
 */
export function talosAddressOf(m: Pick<MachineRow, 'address' | 'ipv6' | 'ipv4'>): string | null {
  return m.address ?? m.ipv6 ?? m.ipv4 ?? null;
}

/**
 * Admin credentials for one cluster, minted once per caller and reused for every node of a pass:
 * minting signs a fresh certificate each time.
 */
export async function clusterAccess(deps: Pick<Deps, 'sealer'>, cluster: Pick<ClusterRow, 'id' | 'secretsSealed' | 'name' | 'endpoint'>) {
  const secrets = openClusterSecrets(deps, cluster);
  let talos: Promise<ClientCredentials> | undefined;
  let context: SecureContext | undefined;
  let kubeconfig: Promise<string> | undefined;
  return {
    secrets,
    talosCredentials: () => (talos ??= talosAdminCredentials(secrets)),
    kubeCredentials: () => kubeAdminCredentials(secrets),
    kubeconfig: () => (kubeconfig ??= renderKubeconfig({ clusterName: cluster.name, endpoint: cluster.endpoint, secrets })),
    /** An mTLS client for a configured node; the caller closes it. */
    async talosClient(address: string): Promise<TalosApiClient> {
      const c = await (talos ??= talosAdminCredentials(secrets));
      // Parsing the CA, certificate and key once serves every node the caller dials.
      context ??= createTalosSecureContext(c.caPem, c.certPem, c.keyPem);
      return createTalosClient({ mode: 'configured', address, ca: c.caPem, cert: c.certPem, key: c.keyPem, secureContext: context });
    },
  };
}
export type ClusterAccess = Awaited<ReturnType<typeof clusterAccess>>;
