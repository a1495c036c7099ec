import type { Settings, UpgradeTimings } from '../../../functions/settings.ts';

export const DEFAULT_UPGRADE_TIMINGS: UpgradeTimings = {
  callDeadlineMs: 10_000,
  installDeadlineMs: 15 * 60_000,
  rebootTimeoutMs: 15 * 60_000,
  gateTimeoutMs: 10 * 60_000,
  pollMs: 2_000,
  kubeDeadlineMs: 10_000,
  readConcurrency: 16,
  manifestWaitMs: 5 * 60_000,
};

export function upgradeTimings(settings: Pick<Settings, 'upgrade'>): UpgradeTimings {
  return { ...DEFAULT_UPGRADE_TIMINGS, ...settings.upgrade };
}
