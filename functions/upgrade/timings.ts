import type { Settings } from '../deps.ts';

/** How long each phase of a node's upgrade may take and how often it is polled. */
export interface UpgradeTimings {
  /** Deadline of each unary Talos call (Version, ServiceList, Reboot, …). */
  callDeadlineMs: number;
  /** Deadline of the image pull and install streams. */
  installDeadlineMs: number;
  /** From the upgrade call until the node answers again, rebooted, with the new version. */
  rebootTimeoutMs: number;
  /** From the node's return until it passes the health gate. */
  gateTimeoutMs: number;
  /** Pause between polls while waiting and gating. */
  pollMs: number;
  /** Time budget of one Kubernetes API read. */
  kubeDeadlineMs: number;
  /** Talos reads in flight at once when the whole cluster is checked. */
  readConcurrency: number;
}

export const DEFAULT_UPGRADE_TIMINGS: UpgradeTimings = {
  callDeadlineMs: 10_000,
  installDeadlineMs: 15 * 60_000,
  rebootTimeoutMs: 15 * 60_000,
  gateTimeoutMs: 10 * 60_000,
  pollMs: 2_000,
  kubeDeadlineMs: 10_000,
  readConcurrency: 16,
};

export function upgradeTimings(settings: Pick<Settings, 'upgrade'>): UpgradeTimings {
  return { ...DEFAULT_UPGRADE_TIMINGS, ...settings.upgrade };
}
