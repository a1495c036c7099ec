// Builds the runner into dist/: tsc emits the JavaScript (tsconfig.build.json), then the files the
// code reads at run time next to its own module (import.meta.url) are copied to the same relative
// places, so `node dist/runner/main.js` works from any directory with no TypeScript loader.
//
//   node scripts/build.mjs             build
//   node scripts/build.mjs --if-stale  build only when dist/ is missing or older than a source
import { execa } from 'execa';
import { cp, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import process from 'node:process';

export const ROOT = join(import.meta.dirname, '..');
export const DIST = join(ROOT, 'dist');
const STAMP = join(DIST, '.build-stamp.json');

// Compiled by tsc (tsconfig.build.json lists the same folders).
const CODE_DIRS = ['runner', 'functions', 'lib', 'db', 'cli'];
// Read at run time relative to the module that reads them: db/client.ts (migrations),
// lib/talos/api/proto-loader.ts (protos), functions/provision/root-module.ts (../../modules).
const ASSETS = ['db/migrations', 'lib/talos/api/protos', 'lib/talos/schema', 'modules'];
const CONFIG_FILES = ['tsconfig.json', 'tsconfig.build.json', 'package.json', 'scripts/build.mjs'];
// Never copied or watched: tofu's per-directory caches and state beside a module.
const SKIP = /(^|\/)(node_modules|\.terraform)(\/|$)|\.tfstate(\.backup)?$|\.terraform\.lock\.hcl$/;

async function exists(path) {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** The newest mtime among the sources, their directories (a deleted file touches its directory) and the config. */
async function newestSource() {
  let newest = 0;
  const visit = async (path) => {
    if (SKIP.test(relative(ROOT, path))) return;
    let st;
    try {
      st = await stat(path);
    } catch {
      return;
    }
    newest = Math.max(newest, st.mtimeMs);
    if (st.isDirectory()) for (const e of await readdir(path)) await visit(join(path, e));
  };
  for (const p of [...CODE_DIRS, ...ASSETS, ...CONFIG_FILES]) await visit(join(ROOT, p));
  return newest;
}

/** Why dist/ must be rebuilt, or undefined when it is current. */
export async function staleReason() {
  let stamp;
  try {
    stamp = JSON.parse(await readFile(STAMP, 'utf8'));
  } catch {
    return 'dist/ has not been built';
  }
  if ((await newestSource()) > stamp.startedAt) return 'a source changed since the last build';
  return undefined;
}

export async function build() {
  // The stamp records when the build began, so an edit made while tsc runs still counts as newer.
  const startedAt = Date.now();
  await rm(DIST, { recursive: true, force: true });
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  if (!(await exists(tsc))) throw new Error('TypeScript is not installed (it is a dev dependency): run `npm ci`, then build again');
  const r = await execa(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json')], { cwd: ROOT, reject: false, all: true });
  if (r.exitCode !== 0) throw new Error(`tsc failed:\n${r.all}`);
  for (const a of ASSETS) {
    const from = join(ROOT, a);
    if (!(await exists(from))) continue;
    await mkdir(join(DIST, a, '..'), { recursive: true });
    await cp(from, join(DIST, a), { recursive: true, filter: (src) => !SKIP.test(relative(ROOT, src)) });
  }
  await writeFile(STAMP, JSON.stringify({ startedAt }) + '\n');
}

/** Builds when needed; says why on stderr (stdout belongs to the runner's own output). */
export async function ensureBuilt() {
  const reason = await staleReason();
  if (!reason) return false;
  process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level: 'info', msg: 'building dist/', reason }) + '\n');
  await build();
  return true;
}

if (import.meta.filename === process.argv[1]) {
  try {
    if (process.argv.includes('--if-stale')) await ensureBuilt();
    else await build();
  } catch (err) {
    process.stderr.write(`build: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
