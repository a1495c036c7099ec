import type { SecureContext } from 'node:tls';
import { guardFor } from '../../lib/dial-guard.ts';
import { createTalosClient, createTalosSecureContext, type TalosApiClient } from '../../lib/talos/api/index.ts';
import { kubeAdminCredentials, renderKubeconfig, talosAdminCredentials, type ClientCredentials } from '../../lib/talos/clientconfig.ts';
import type { Deps } from '../../functions/context.ts';
import type { ClusterRow } from '../../functions/inventory/load.ts';
import { openClusterSecrets } from '../../functions/machine-config/secrets.ts';

/**
 * Admin credentials for one cluster, minted once per caller and reused for every node of a pass:
 * minting signs a fresh certificate each time.
 */
export async function clusterAccess(deps: Pick<Deps, 'sealer' | 'settings'>, cluster: Pick<ClusterRow, 'id' | 'secretsSealed' | 'name' | 'endpoint'>) {
  const secrets = openClusterSecrets(deps, cluster);
  const dialGuard = guardFor(deps.settings.nodeNetworks);
  let talos: Promise<ClientCredentials> | undefined;
  let context: SecureContext | undefined;
  let kubeconfig: Promise<string> | undefined;
  /** An mTLS client for a configured node; the caller closes it. */
  const talosClient = async (address: string): Promise<TalosApiClient> => {
    const c = await (talos ??= talosAdminCredentials(secrets));
    // Parsing the CA, certificate and key once serves every node the caller dials.
    context ??= createTalosSecureContext(c.caPem, c.certPem, c.keyPem);
    return createTalosClient({ mode: 'configured', address, ca: c.caPem, cert: c.certPem, key: c.keyPem, secureContext: context, ...(dialGuard ? { guard: dialGuard } : {}) });
  };
  return {
    secrets,
    /** Where this runner may dial (REZUS_NODE_NETWORKS): every connection to the cluster goes through it. */
    dialGuard,
    talosCredentials: () => (talos ??= talosAdminCredentials(secrets)),
    kubeCredentials: () => kubeAdminCredentials(secrets),
    kubeconfig: () => (kubeconfig ??= renderKubeconfig({ clusterName: cluster.name, endpoint: cluster.endpoint, secrets })),
    talosClient,
    /** `fn` with an mTLS client of its own, closed once `fn` settles. */
    async withTalos<T>(address: string, fn: (client: TalosApiClient) => Promise<T>): Promise<T> {
      const client = await talosClient(address);
      try {
        return await fn(client);
      } finally {
        client.close();
      }
    },
  };
}
export type ClusterAccess = Awaited<ReturnType<typeof clusterAccess>>;
