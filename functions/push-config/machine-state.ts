import type { MachineRow } from '../inventory/load.ts';

/**
 * `machines.state` values this module writes:
 * - `applied`: the node accepted a pushed config but has not yet answered over mTLS;
 * - `configured`: it answered Version over mTLS with the cluster's admin certificate.
 */
export const APPLIED = 'applied';
export const CONFIGURED = 'configured';

/**
 * States in which a node may still be in maintenance mode and so may take an unauthenticated
 * push. Everything else (including states other modules may add later) counts as holding a
 * config, so an unknown state fails safe: mTLS only.
 */
const BEFORE_CONFIG: ReadonlySet<string> = new Set(['new', 'provisioned']);

export function mayBeInMaintenance(m: Pick<MachineRow, 'state'>): boolean {
  return BEFORE_CONFIG.has(m.state);
}

/**
 * Whether a control plane has its config and can be bootstrapped: a metal machine once a push
 * was confirmed over mTLS, a cloud machine once tofu created it (its config was the user_data).
 */
export function readyForBootstrap(m: Pick<MachineRow, 'state' | 'provider'>): boolean {
  return m.state === CONFIGURED || (m.provider !== 'metal' && m.state === 'provisioned');
}
