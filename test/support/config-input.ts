import { expect } from 'vitest';
import { TalosConfigError, type MachineConfigInput } from '../../lib/talos/config.ts';
import type { ClusterSecrets } from '../../lib/talos/secrets.ts';

/** A machine config input for the generator tests: a cluster `home` at cp.example.test, /dev/sda. */
export function configInput(secrets: ClusterSecrets, role: MachineConfigInput['role'], overrides: Partial<MachineConfigInput> = {}): MachineConfigInput {
  return { secrets, clusterName: 'home', endpoint: 'https://cp.example.test:6443', role, installDisk: '/dev/sda', ...overrides };
}

/** The TalosConfigError `fn` throws; fails the test when it throws anything else or nothing. */
export function configErrorOf(fn: () => unknown): TalosConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(TalosConfigError);
    return error as TalosConfigError;
  }
  throw new Error('expected a TalosConfigError');
}
