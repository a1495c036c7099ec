import type { Deps } from '../context.ts';

export const HOUR_MS = 3_600_000;

/** Samples older than this are folded into hourly aggregates, so reads switch tables here. */
export const rawCutoff = (deps: Pick<Deps, 'settings'>, now: number): number => now - deps.settings.retentionRawS * 1000;
