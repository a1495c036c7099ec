// Builds the Worker exactly as `wrangler deploy` would (--dry-run: no account, no upload). The
// wrangler CLI refuses Node < 22.12, so it runs on this process's Node when new enough (CI's
// Node 24), else on a Node binary already on disk: WRANGLER_NODE, or the `node` npm package's
// binary under node_modules. Nothing is downloaded here.
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');
const WRANGLER = join(ROOT, 'node_modules', 'wrangler', 'bin', 'wrangler.js');

const atLeast = (version: string, major: number, minor: number) => {
  const [ma = 0, mi = 0] = version.replace(/^v/, '').split('.').map(Number);
  return ma > major || (ma === major && mi >= minor);
};

/** A Node binary wrangler accepts, or why none was found. */
export async function wranglerNode(): Promise<{ node: string } | { missing: string }> {
  if (atLeast(process.version, 22, 12)) return { node: process.execPath };
  const candidates = [process.env.WRANGLER_NODE, join(ROOT, 'node_modules', 'node', 'bin', 'node')].filter((p): p is string => !!p && existsSync(p));
  for (const node of candidates) {
    const v = await execa(node, ['--version'], { reject: false });
    if (v.exitCode === 0 && atLeast(v.stdout.trim(), 22, 12)) return { node };
  }
  return { missing: `wrangler needs Node >= 22.12; this is ${process.version} and neither WRANGLER_NODE nor node_modules/node/bin/node is one` };
}

/** Runs `wrangler deploy --dry-run --outdir` on a config; returns the bundle's path. */
export async function buildWorker(node: string, config: string, outdir: string): Promise<string> {
  const res = await execa(node, [WRANGLER, 'deploy', '--dry-run', '--outdir', outdir, '--config', config], {
    cwd: ROOT,
    reject: false,
    all: true,
    // No telemetry, no update check: the build stays on this machine.
    env: { WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', WRANGLER_LOG_PATH: join(outdir, 'logs'), NO_UPDATE_NOTIFIER: '1' },
  });
  if (res.exitCode !== 0) throw new Error(`wrangler deploy --dry-run failed:\n${res.all}`);
  const bundle = join(outdir, 'worker.js');
  if (!existsSync(bundle)) throw new Error(`wrangler wrote no ${bundle}:\n${res.all}`);
  return bundle;
}

/** Built-ins the bundle may import: what workerd provides under nodejs_compat and lib/ uses. */
export const WORKERD_PROVIDED = new Set(['node:crypto', 'node:buffer', 'node:events', 'node:async_hooks']);

/** Every Node built-in (`node:x` or bare `x`) the bundle still imports or requires at run time. */
export function nodeImports(source: string): string[] {
  const builtins = new Set(builtinModules);
  const found = new Set<string>();
  for (const m of source.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\(\s*)["']([\w:/]+)["']/g)) {
    const name = m[1]!;
    if (name.startsWith('node:')) found.add(name);
    else if (builtins.has(name) || builtins.has(name.split('/')[0]!)) found.add(`node:${name}`);
  }
  return [...found].sort();
}
