// `npm start`: builds dist/ when it is missing or stale, then runs the built runner in this same
// process (an import, not a child), so the runner is one node process with no TypeScript loader.
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import process from 'node:process';
import module from 'node:module';
import { DIST, ensureBuilt } from './build.mjs';

try {
  await ensureBuilt();
} catch (err) {
  process.stderr.write(`start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
module.enableCompileCache?.(join(DIST, '.compile-cache'));
await import(pathToFileURL(join(DIST, 'runner', 'main.js')).href);
