// A V8 CPU profile of one stretch of a bench (the measured part, not its setup).
import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';

export interface Profiling {
  /** Stops the profiler and writes its profile to `file` (.cpuprofile, for DevTools). */
  stop(file: string): Promise<void>;
}

/** Starts profiling this process when `enabled`; undefined otherwise. */
export async function startProfile(enabled: boolean): Promise<Profiling | undefined> {
  if (!enabled) return undefined;
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return {
    async stop(file) {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(file, JSON.stringify(profile));
      session.disconnect();
    },
  };
}
