import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { parse, stringify } from 'yaml';
import { usageError } from './exit.ts';

type Named = { name: string } & Record<string, unknown>;
type Obj = Record<string, unknown>;

/** Where kubectl reads: the first file of $KUBECONFIG, else ~/.kube/config. */
export function defaultKubeconfigPath(env: NodeJS.ProcessEnv = process.env): string {
  const first = env.KUBECONFIG?.split(delimiter).find((p) => p.length > 0);
  return first ?? join(env.HOME || homedir(), '.kube', 'config');
}

/** Where talosctl reads: $TALOSCONFIG, else ~/.talos/config. */
export function defaultTalosconfigPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.TALOSCONFIG || join(env.HOME || homedir(), '.talos', 'config');
}

async function readYaml(path: string): Promise<Obj | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const value: unknown = parse(text);
  if (value === null || value === undefined) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) throw usageError(`${path}: not a YAML mapping; not touching it`);
  return value as Obj;
}

/** Client configs hold private keys: 0600, written whole or not at all. */
export async function writePrivate(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, text, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}

/** Entries of `incoming` replace same-named ones; every other entry stays where it was. */
function mergeNamed(existing: unknown, incoming: unknown): Named[] {
  const have = Array.isArray(existing) ? (existing as Named[]) : [];
  const add = Array.isArray(incoming) ? (incoming as Named[]) : [];
  const names = new Set(add.map((e) => e.name));
  const out = have.map((e) => (names.has(e.name) ? add.find((a) => a.name === e.name)! : e));
  for (const a of add) if (!have.some((e) => e.name === a.name)) out.push(a);
  return out;
}

/** Merges a kubeconfig into a file kubectl reads and makes its context current. */
export async function mergeKubeconfig(path: string, incomingText: string): Promise<{ context: string }> {
  const incoming = parse(incomingText) as Obj;
  const current = (await readYaml(path)) ?? { apiVersion: 'v1', kind: 'Config', preferences: {} };
  const merged: Obj = {
    ...current,
    clusters: mergeNamed(current.clusters, incoming.clusters),
    users: mergeNamed(current.users, incoming.users),
    contexts: mergeNamed(current.contexts, incoming.contexts),
    'current-context': incoming['current-context'],
  };
  await writePrivate(path, stringify(merged, { lineWidth: 0 }));
  return { context: String(incoming['current-context']) };
}

/** Merges a talosconfig into the file talosctl reads and makes its context current. */
export async function mergeTalosconfig(path: string, incomingText: string): Promise<{ context: string }> {
  const incoming = parse(incomingText) as { context: string; contexts: Obj };
  const current = (await readYaml(path)) ?? {};
  const contexts = { ...((current.contexts as Obj | undefined) ?? {}), ...incoming.contexts };
  await writePrivate(path, stringify({ ...current, context: incoming.context, contexts }, { lineWidth: 0 }));
  return { context: incoming.context };
}
