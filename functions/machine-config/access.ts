import type { Db } from '../../db/client.ts';
import { meshDialer } from '../../lib/mesh/dial.ts';
import type { MachineRow } from '../inventory/load.ts';

/**
 * Where RezusCloud reaches a machine's Talos API: the address the user gave (it may carry a port
 * forward), else the IPv6 tofu reported (v1 reaches nodes directly over IPv6), else its IPv4.
 */
export function talosAddressOf(m: Pick<MachineRow, 'address' | 'ipv6' | 'ipv4'>): string | null {
  return m.address ?? m.ipv6 ?? m.ipv4 ?? null;
}


/** The names of the machines the runner could not reach: no direct address and no delivered overlay address. */
export async function machinesWithoutAddress(
  db: Db,
  clusterId: string,
  rows: readonly Pick<MachineRow, 'id' | 'name' | 'address' | 'ipv6' | 'ipv4'>[],
): Promise<string[]> {
  const dial = await meshDialer(db, clusterId);
  return rows.filter((m) => !dial.address(m.id, talosAddressOf(m))).map((m) => m.name).sort();
}
