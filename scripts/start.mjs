// `npm start`: builds dist/ when it is missing or stale, then runs the built runner in this same
// process (an import, not a child), so the runner is one node process with no TypeScript loader.
import module from 'node:module';
import { DIST, ensureBuilt } from './build.mjs';

// Built-ins through require(), as in build.mjs: an import of node:process would build its ES
// module facade, which opens stdin as a stream the runner never reads.
const require = module.createRequire(import.meta.url);
/** @type {typeof import('node:url')} */
const { pathToFileURL } = require('node:url');
/** @type {typeof import('node:path')} */
const { join } = require('node:path');
/** @type {NodeJS.Process} */
const process = require('node:process');

try {
  await ensureBuilt();
} catch (err) {
  process.stderr.write(`start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
module.enableCompileCache?.(join(DIST, '.compile-cache'));
await import(pathToFileURL(join(DIST, 'runner', 'main.js')).href);
