import { describe, expect, it } from 'vitest';
import { talosHostRange, talosInstallProblem } from '../lib/talos/talos-compat.ts';
import { installerRefusal } from '../functions/upgrade/plan.ts';

describe('which Talos an installer installs over', () => {
  it('knows each line\'s bounds as upstream sets them, pre-releases included', () => {
    expect(talosHostRange('v1.13.9')).toEqual({ min: 'v1.11.0', below: 'v1.15.0' });
    expect(talosHostRange('v1.14.0-rc.1')).toEqual({ min: 'v1.12.0', below: 'v1.16.0' });
    expect(talosHostRange('v1.12.11')).toEqual({ min: 'v1.10.0', below: 'v1.14.0' });
    expect(talosHostRange('v1.11.6')).toEqual({ min: 'v1.9.0', below: 'v1.13.0' });
    expect(talosHostRange('v1.10.0')).toEqual({ min: 'v1.8.0', below: 'v1.12.0' });
    // v1.9 is the one line whose minimum is not two minors back.
    expect(talosHostRange('v1.9.5')).toEqual({ min: 'v1.8.0', below: 'v1.11.0' });
    expect(talosHostRange('v1.2.0')).toEqual({ min: 'v1.0.0', below: 'v1.3.0' });
    expect(talosHostRange('v1.15.0')).toBeUndefined();
    expect(talosHostRange('v1.1.0')).toBeUndefined();
    expect(talosHostRange('v2.0.0')).toBeUndefined();
  });

  it('takes exactly the minimum, refuses the last patch below it, and counts only the version core', () => {
    expect(talosInstallProblem('v1.11.0', 'v1.13.9')).toBeUndefined();
    expect(talosInstallProblem('v1.10.11', 'v1.13.9')).toEqual({
      code: 'host_too_old',
      message: 'v1.10.11 is too old to upgrade to Talos v1.13.9 (Talos v1.13 installs over v1.11.0 or later), so upgrade to v1.12.x first',
    });
    // A v1.11.0 pre-release sorts before v1.11.0, but upstream compares the core only.
    expect(talosInstallProblem('v1.11.0-alpha.0', 'v1.13.9')).toBeUndefined();
    expect(talosInstallProblem('v1.10.99-rc.1', 'v1.13.9')?.code).toBe('host_too_old');
    // Two lines behind: the step is the newest line the node can take.
    expect(talosInstallProblem('v1.9.6', 'v1.13.9')?.message).toMatch(/, so upgrade to v1\.11\.x first$/);
    // Nothing the table knows installs over it: no step is offered.
    expect(talosInstallProblem('v0.14.3', 'v1.13.9')?.message).toBe('v0.14.3 is too old to upgrade to Talos v1.13.9 (Talos v1.13 installs over v1.11.0 or later)');
  });

  it('refuses from the exclusive downgrade maximum on, pre-releases of it included', () => {
    expect(talosInstallProblem('v1.14.12', 'v1.13.9')).toBeUndefined();
    expect(talosInstallProblem('v1.15.0', 'v1.13.9')).toEqual({
      code: 'host_too_new',
      message: 'v1.15.0 is too new to downgrade to Talos v1.13.9 (Talos v1.13 installs over versions before v1.15.0), so downgrade to v1.14.x first',
    });
    expect(talosInstallProblem('v1.15.0-alpha.0', 'v1.13.9')?.code).toBe('host_too_new');
    expect(talosInstallProblem('v1.16.1', 'v1.13.9')?.message).toBe('v1.16.1 is too new to downgrade to Talos v1.13.9 (Talos v1.13 installs over versions before v1.15.0)');
    expect(talosInstallProblem('v2.0.0', 'v1.13.9')?.code).toBe('host_too_new');
    // Same version, patch downgrades and one-minor downgrades are the installer's business, not refused.
    expect(talosInstallProblem('v1.13.9', 'v1.13.2')).toBeUndefined();
    expect(talosInstallProblem('v1.13.9', 'v1.12.0')).toBeUndefined();
  });

  it('takes pre-release targets by their line', () => {
    expect(talosInstallProblem('v1.12.0', 'v1.14.0-rc.1')).toBeUndefined();
    expect(talosInstallProblem('v1.12.0-beta.0', 'v1.14.0-rc.1')).toBeUndefined();
    expect(talosInstallProblem('v1.11.6', 'v1.14.0-rc.1')).toEqual({
      code: 'host_too_old',
      message: 'v1.11.6 is too old to upgrade to Talos v1.14.0-rc.1 (Talos v1.14 installs over v1.12.0 or later), so upgrade to v1.13.x first',
    });
    expect(talosInstallProblem('v1.16.0-alpha.1', 'v1.14.0-rc.1')?.code).toBe('host_too_new');
  });

  it('leaves a line it does not know, and a host it cannot read, to the installer', () => {
    expect(talosInstallProblem('v1.10.0', 'v1.15.0')).toBeUndefined();
    expect(talosInstallProblem('v1.10.0', 'v1.15.0-alpha.0')).toBeUndefined();
    expect(talosInstallProblem('v1.0.0', 'v1.1.3')).toBeUndefined();
    expect(talosInstallProblem('v0.1.0', 'v3.0.0')).toBeUndefined();
    expect(talosInstallProblem('unknown', 'v1.13.9')).toBeUndefined();
  });
});

describe('installerRefusal', () => {
  it('names each machine the target cannot be installed over, one clause per version, the cluster\'s version standing in for unrecorded ones', () => {
    const machines = [
      { name: 'w2', talosVersion: 'v1.11.3' },
      { name: 'w1', talosVersion: null },
      { name: 'cp1', talosVersion: null },
      { name: 'w3', talosVersion: 'v1.9.6' },
    ];
    const refusal = installerRefusal('v1.13.9', { talosVersion: 'v1.10.4' }, machines);
    expect(refusal?.machines).toEqual([
      { name: 'cp1', talosVersion: 'v1.10.4', code: 'host_too_old' },
      { name: 'w1', talosVersion: 'v1.10.4', code: 'host_too_old' },
      { name: 'w3', talosVersion: 'v1.9.6', code: 'host_too_old' },
    ]);
    expect(refusal?.message).toBe(
      'cp1, w1: v1.10.4 is too old to upgrade to Talos v1.13.9 (Talos v1.13 installs over v1.11.0 or later), so upgrade to v1.12.x first; ' +
        'w3: v1.9.6 is too old to upgrade to Talos v1.13.9 (Talos v1.13 installs over v1.11.0 or later), so upgrade to v1.11.x first. ' +
        "The node's installer checks this before it installs, after the drain, and refuses; force does not skip that check",
    );
    // Recorded versions win: a cluster still recording v1.10.4 whose machines all moved on is fine.
    expect(installerRefusal('v1.13.9', { talosVersion: 'v1.10.4' }, [{ name: 'cp1', talosVersion: 'v1.12.11' }])).toBeUndefined();
    expect(installerRefusal('v1.15.0', { talosVersion: 'v1.10.4' }, machines)).toBeUndefined();
  });
});
