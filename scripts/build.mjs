// Builds the runner into dist/: esbuild bundles the three entry points (the runner, the add-on
// entry and the CLI) with their dependencies into a few ESM files, then the files the code reads
// at run time next to its own module (import.meta.url) are copied to the same relative places, so
// `node dist/runner/main.js` works from any directory with no TypeScript loader.
//
// Why a bundle: loading the unbundled program meant resolving and reading a few thousand module
// files at every start, which was most of the start-up time. Modules the runner imports with
// `await import()` become chunks of their own and are read only when first needed.
//
//   node scripts/build.mjs             build
//   node scripts/build.mjs --if-stale  build only when dist/ is missing or older than a source
import { createRequire } from 'node:module';

// Built-ins through require(), not `import`: `npm start` loads this module first thing, and an
// import of node:process builds its ES module facade, which runs every lazy getter (stdin as a
// stream; node:fs's facade loads its streams). See processAsRequirePlugin below for the bundle.
const require = createRequire(import.meta.url);
/** @type {typeof import('node:fs')} */
const { readdirSync, readFileSync, statSync } = require('node:fs');
/** @type {typeof import('node:fs/promises')} */
const { cp, mkdir, readFile, rm, stat, writeFile } = require('node:fs/promises');
/** @type {typeof import('node:path')} */
const { join, relative, sep } = require('node:path');
/** @type {NodeJS.Process} */
const process = require('node:process');

export const ROOT = join(import.meta.dirname, '..');
export const DIST = join(ROOT, 'dist');
const STAMP = join(DIST, '.build-stamp.json');

// Bundled from these folders (the entry points below import nothing else of the tree).
const CODE_DIRS = ['runner', 'functions', 'lib', 'db', 'cli'];
// Each lands at dist/<folder>/<name>.js, one level below dist/ like every chunk (dist/chunks/).
// The runner and the CLI are bundled apart: code shared by entry points and lazy imports is split
// into a chunk per set of importers, and with the CLI in the same build the runner's start loaded
// many more, smaller chunks (each one a module to resolve and load).
const BUNDLES = [
  { entryPoints: ['runner/main.ts', 'runner/addon-main.ts'], chunkNames: 'chunks/[name]-[hash]' },
  { entryPoints: ['cli/main.ts'], chunkNames: 'chunks/cli-[name]-[hash]' },
  // A worker thread's module, loaded by path (runner/jobs/backup/executor.ts): its own build, so it
  // shares no chunk with the runner and lands at dist/runner/jobs/backup/copy-worker.js.
  { entryPoints: ['runner/jobs/backup/copy-worker.ts'], chunkNames: 'chunks/backup-[name]-[hash]' },
];
// Read at run time relative to the module that reads them: db/client.ts (migrations),
// lib/talos/api/proto-loader.ts (protos), runner/jobs/provision/root-module.ts (../../../modules).
const ASSETS = ['db/migrations', 'lib/talos/api/protos', 'lib/talos/schema', 'modules'];
const CONFIG_FILES = ['tsconfig.json', 'package.json', 'package-lock.json', 'scripts/build.mjs'];
// Left to node_modules: libsql loads its native binding with a computed require().
const EXTERNAL = ['libsql'];
// Never copied or watched: tofu's per-directory caches and state beside a module.
const SKIP = /(^|\/)(node_modules|\.terraform)(\/|$)|\.tfstate(\.backup)?$|\.terraform\.lock\.hcl$/;

async function exists(path) {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * The newest mtime among the sources, their directories (a deleted file touches its directory) and
 * the config. Synchronous on purpose: `npm start` runs this before every start, and a few hundred
 * stat calls take a few milliseconds this way, several times that through the promise API.
 */
function newestSource() {
  let newest = 0;
  // Paths are joined as strings, relative to ROOT: path.join and path.relative on every file
  // were most of this walk's time.
  const visit = (rel) => {
    if (SKIP.test(rel)) return;
    const path = `${ROOT}${sep}${rel}`;
    const st = statSync(path, { throwIfNoEntry: false });
    if (!st) return;
    newest = Math.max(newest, st.mtimeMs);
    if (st.isDirectory()) for (const e of readdirSync(path)) visit(`${rel}/${e}`);
  };
  // Assets inside a code folder (the migrations, the protos) are walked with it, not twice.
  const walked = [...CODE_DIRS, ...ASSETS.filter((a) => !CODE_DIRS.some((d) => a.startsWith(`${d}/`))), ...CONFIG_FILES];
  for (const p of walked) visit(p);
  return newest;
}

/** Why dist/ must be rebuilt, or undefined when it is current. */
export async function staleReason() {
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(STAMP, 'utf8'));
  } catch {
    return 'dist/ has not been built';
  }
  if (newestSource() > stamp.startedAt) return 'a source changed since the last build';
  return undefined;
}

/**
 * A module of the tree that reads `import.meta.url` means its own place in the source tree, which
 * the copied assets mirror under dist/. In the bundle its code sits in a file one level below
 * dist/, so the URL is rebuilt from there.
 */
const sourceUrlPlugin = {
  name: 'source-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, async (args) => {
      const rel = relative(ROOT, args.path).split(sep).join('/');
      const text = await readFile(args.path, 'utf8');
      if (rel.startsWith('..') || rel.startsWith('node_modules/') || !text.includes('import.meta.url')) return undefined;
      const own = JSON.stringify(`../${rel.replace(/\.ts$/, '.js')}`);
      return { contents: text.replaceAll('import.meta.url', `new URL(${own}, import.meta.url).href`), loader: 'ts' };
    });
  },
};

/**
 * `import process from 'node:process'` in an ES module makes Node build the built-in's ES module
 * facade, which reads every export once: that runs process.stdin's lazy getter, which opens stdin
 * as a stream (a few ms of every start, for a stream the runner never reads). A `require()` runs no
 * getter, so the bundle takes node:process through the banner's createRequire. The other
 * built-ins' facades cost less than the extra chunk such a shim becomes, so they stay imports.
 */
const processAsRequirePlugin = {
  name: 'process-as-require',
  setup(b) {
    b.onResolve({ filter: /^(node:)?process$/ }, (args) => (args.kind === 'import-statement' ? { path: 'node:process', namespace: 'node-builtin' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'node-builtin' }, () => ({ contents: "module.exports = require('node:process');", loader: 'js' }));
  },
};

async function loadEsbuild() {
  try {
    return await import('esbuild');
  } catch {
    throw new Error('esbuild is not installed (it is a dev dependency): run `npm ci`, then build again');
  }
}

export async function build() {
  // The stamp records when the build began, so an edit made while esbuild runs still counts as newer.
  const startedAt = Date.now();
  const esbuild = await loadEsbuild();
  await rm(DIST, { recursive: true, force: true });
  const bundle = ({ entryPoints, chunkNames }) => esbuild.build({
    absWorkingDir: ROOT,
    entryPoints,
    outdir: DIST,
    outbase: ROOT,
    chunkNames,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    external: EXTERNAL,
    // CommonJS dependencies inside an ES module bundle still call require() for Node built-ins
    // and for the externals.
    banner: { js: "import { createRequire as __rezusCreateRequire } from 'node:module'; const require = __rezusCreateRequire(import.meta.url);" },
    // Names are kept (stack traces stay readable); whitespace and comments go: V8 keeps every
    // loaded file's source in memory, as UTF-16 if a single comment has a non-ASCII character.
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    // Maps for `node --enable-source-maps` (off by default: it makes every stack trace slower).
    sourcemap: 'linked',
    sourcesContent: false,
    logLevel: 'error',
    plugins: [sourceUrlPlugin, processAsRequirePlugin],
    metafile: true,
  });
  const metas = [];
  for (const b of BUNDLES) metas.push((await bundle(b)).metafile);
  // Which modules each output file holds and what it imports, statically or not: the test that
  // keeps heavy libraries out of the runner's start reads it (test/runner-bundle.test.ts).
  const meta = { inputs: Object.assign({}, ...metas.map((m) => m.inputs)), outputs: Object.assign({}, ...metas.map((m) => m.outputs)) };
  await writeFile(join(DIST, 'meta.json'), JSON.stringify(meta));
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
