// vitest globalSetup: the process-level suites start the runner the way production does, from
// dist/, so build it once before any of them runs (nothing to do when it is current).
import { execa } from 'execa';
import { join } from 'node:path';

export default async function buildDist(): Promise<void> {
  await execa(process.execPath, [join(import.meta.dirname, '..', '..', 'scripts', 'build.mjs'), '--if-stale'], { stdio: 'inherit' });
}
