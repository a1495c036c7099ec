import type { Deps } from '../../../functions/context.ts';
import type { PushTimings } from '../../../functions/settings.ts';

/**
 * Real bare metal installs Talos to disk from the ISO before it reboots configured, which can
 * take minutes (the installer image is pulled first); a single call should still answer fast.
 */
export const DEFAULT_PUSH_TIMINGS: PushTimings = {
  callDeadlineMs: 15_000,
  readyTimeoutMs: 15 * 60_000,
  pollMs: 2_000,
};

export function pushTimings(deps: Pick<Deps, 'settings'>): PushTimings {
  return { ...DEFAULT_PUSH_TIMINGS, ...deps.settings.pushConfig };
}
