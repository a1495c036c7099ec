import type { Db } from '../../db/client.ts';
import { meshDialer, type MeshDialer } from '../../lib/mesh/dial.ts';
import type { ClusterRow, MachineRow } from '../inventory/load.ts';

/**
 * Where RezusCloud reaches a machine's Talos API: the address the user gave (it may carry a port
 * forward), else the IPv6 tofu reported (v1 reaches nodes directly over IPv6), else its IPv4.
 */
export function talosAddressOf(m: Pick<MachineRow, 'address' | 'ipv6' | 'ipv4'>): string | null {
  return m.address ?? m.ipv6 ?? m.ipv4 ?? null;
}

type Dialled = Pick<MachineRow, 'id' | 'address' | 'ipv6' | 'ipv4'>;

/** Where to reach each machine's Talos API: one mesh lookup per cluster, then a function per machine. */
export interface TalosDialer {
  (m: Dialled): string | null;
  /** The cluster's Kubernetes endpoint as seen from here (an overlay address on a mesh cluster). */
  kubeEndpoint(cluster: Pick<ClusterRow, 'endpoint'>, machines: readonly Pick<MachineRow, 'id' | 'role'>[]): string;
}

export async function talosDialer(deps: { db: Db }, clusterId: string): Promise<TalosDialer> {
  const mesh: MeshDialer = await meshDialer(deps.db, clusterId);
  const dial = ((m: Dialled) => mesh.address(m.id, talosAddressOf(m))) as TalosDialer;
  dial.kubeEndpoint = (cluster, machines) => mesh.kubeEndpoint(cluster.endpoint, machines.filter((m) => m.role === 'controlplane').map((m) => m.id));
  return dial;
}

/** One machine's Talos address (the overlay one once it is on the mesh). */
export async function dialOf(deps: { db: Db }, m: Dialled & Pick<MachineRow, 'clusterId'>): Promise<string | null> {
  return (await talosDialer(deps, m.clusterId))(m);
}

/** The names of the machines the runner could not reach: no direct address and no delivered overlay address. */
export async function machinesWithoutAddress(
  db: Db,
  clusterId: string,
  rows: readonly Pick<MachineRow, 'id' | 'name' | 'address' | 'ipv6' | 'ipv4'>[],
): Promise<string[]> {
  const dial = await talosDialer({ db }, clusterId);
  return rows.filter((m) => !dial(m)).map((m) => m.name).sort();
}
