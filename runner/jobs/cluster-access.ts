import type { SecureContext } from 'node:tls';
import { createTalosClient, createTalosSecureContext, type TalosApiClient } from '../../lib/talos/api/index.ts';
import { kubeAdminCredentials, renderKubeconfig, talosAdminCredentials, type ClientCredentials } from '../../lib/talos/clientconfig.ts';
import type { Deps } from '../../functions/context.ts';
import type { ClusterRow } from '../../functions/inventory/load.ts';
import { openClusterSecrets } from '../../functions/machine-config/secrets.ts';
import { talosAddressOf } from '../../functions/machine-config/access.ts';
import type { MachineRow } from '../../functions/inventory/load.ts';
import { meshDialer, type MeshDialer } from '../../lib/mesh/dial.ts';

type Dialled = Pick<MachineRow, 'id' | 'address' | 'ipv6' | 'ipv4'>;

/** Where to reach each machine's Talos API: one mesh lookup per cluster, then a function per machine. */
export interface TalosDialer {
  (m: Dialled): string | null;
  /** The cluster's Kubernetes endpoint as seen from here (an overlay address on a mesh cluster). */
  kubeEndpoint(cluster: Pick<ClusterRow, 'endpoint'>, machines: readonly Pick<MachineRow, 'id' | 'role'>[]): string;
}

export async function talosDialer(deps: Pick<Deps, 'db'>, clusterId: string): Promise<TalosDialer> {
  const mesh: MeshDialer = await meshDialer(deps.db, clusterId);
  const dial = ((m: Dialled) => mesh.address(m.id, talosAddressOf(m))) as TalosDialer;
  dial.kubeEndpoint = (cluster, machines) => mesh.kubeEndpoint(cluster.endpoint, machines.filter((m) => m.role === 'controlplane').map((m) => m.id));
  return dial;
}

/** One machine's Talos address (the overlay one once it is on the mesh). */
export async function dialOf(deps: Pick<Deps, 'db'>, m: Dialled & Pick<MachineRow, 'clusterId'>): Promise<string | null> {
  return (await talosDialer(deps, m.clusterId))(m);
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
