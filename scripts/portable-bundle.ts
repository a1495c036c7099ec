// Bundles a portable entry (the Hono app, the Worker) the way Workers would, and lists every
// Node-only module it reaches. test/portable-bundle.test.ts fails on any; the lint rules catch
// direct imports earlier, this catches the ones that come in through a dependency.
import { build, type Plugin } from 'esbuild';
import { builtinModules } from 'node:module';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/** Built-ins workerd provides under `nodejs_compat`, the flag wrangler.toml sets. */
export const WORKERD_NODE_BUILTINS = new Set(['crypto', 'events', 'buffer', 'async_hooks']);
/** Packages that need Node (sockets, processes, native code) or generate code at run time. */
const NODE_ONLY_PACKAGES = /^(@grpc\/|execa|@hono\/node-server|croner$|ajv$|ajv\/dist\/(2020|core|ajv)|ajv-formats$|@libsql\/client\/node|libsql$|prom-client)/;

export interface PortableReport {
  /** `module <- importer` for every Node-only import reached. */
  violations: string[];
  bytes: number;
}

export async function checkPortable(entry: string, root = process.cwd()): Promise<PortableReport> {
  const builtins = new Set(builtinModules);
  const violations = new Set<string>();
  const flag: Plugin = {
    name: 'node-only',
    setup(b) {
      b.onResolve({ filter: /.*/ }, (a) => {
        const bare = a.path.replace(/^node:/, '');
        const top = bare.split('/')[0]!;
        const isBuiltin = a.path.startsWith('node:') || builtins.has(bare) || builtins.has(top);
        if (isBuiltin || NODE_ONLY_PACKAGES.test(a.path)) {
          if (!(isBuiltin && WORKERD_NODE_BUILTINS.has(top))) violations.add(`${a.path} <- ${relative(root, a.importer)}`);
          return { path: a.path, external: true };
        }
        return undefined;
      });
    },
  };
  const result = await build({
    entryPoints: [entry],
    absWorkingDir: root,
    bundle: true,
    write: false,
    platform: 'neutral',
    format: 'esm',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['browser', 'module', 'main'],
    logLevel: 'silent',
    plugins: [flag],
  });
  return { violations: [...violations].sort(), bytes: result.outputFiles.reduce((n, f) => n + f.contents.byteLength, 0) };
}

/**
 * Import cycles among the project's own modules, type imports included: a cycle of types still
 * ties two modules so neither can move without the other.
 */
export function findImportCycles(dirs: string[], root = process.cwd()): string[][] {
  const graph = new Map<string, string[]>();
  const files = dirs.flatMap((d) => readdirSync(join(root, d), { recursive: true, encoding: 'utf8' }).map((f) => join(d, f)));
  for (const file of files.filter((f) => /\.tsx?$/.test(f) && !f.endsWith('.d.ts'))) {
    const src = readFileSync(join(root, file), 'utf8');
    const deps = [...src.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'(\.{1,2}\/[^']+)'/g)].map((m) => join(dirname(file), m[1]!));
    graph.set(file, deps);
  }
  // Tarjan's strongly connected components; any component of two or more files is a cycle.
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) cycles.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return cycles;
}
