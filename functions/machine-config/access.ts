import type { MachineRow } from '../inventory/load.ts';

/**
 * Where RezusCloud reaches a machine's Talos API: the address the user gave (it may carry a port
 * forward), else the IPv6 tofu reported (v1 reaches nodes directly over IPv6), else its IPv4.
 */
export function talosAddressOf(m: Pick<MachineRow, 'address' | 'ipv6' | 'ipv4'>): string | null {
  return m.address ?? m.ipv6 ?? m.ipv4 ?? null;
}

