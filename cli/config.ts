import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { parse, stringify } from 'yaml';
import { usageError } from './exit.ts';

export interface CliContext {
  url: string;
  token: string;
}
export interface CliConfig {
  current?: string;
  contexts: Record<string, CliContext>;
}

const isText = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

/** The file is small and ours; a hand check keeps zod out of every command's start-up. */
function readConfigValue(value: unknown): CliConfig | string {
  if (value === null || value === undefined) return { contexts: {} };
  if (typeof value !== 'object' || Array.isArray(value)) return 'not a mapping';
  const { current, contexts = {} } = value as Record<string, unknown>;
  if (current !== undefined && !isText(current)) return 'current: must be a context name';
  if (typeof contexts !== 'object' || contexts === null || Array.isArray(contexts)) return 'contexts: must be a mapping';
  for (const [name, ctx] of Object.entries(contexts as Record<string, unknown>)) {
    const c = ctx as Partial<CliContext> | null;
    if (!c || !isText(c.url) || !isText(c.token)) return `contexts.${name}: needs url and token`;
  }
  return { ...(current ? { current } : {}), contexts: contexts as Record<string, CliContext> };
}

/** `--config`, else `REZUS_CONFIG`, else the XDG location like other CLIs of its kind. */
export function configPath(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (flag) return flag;
  if (env.REZUS_CONFIG) return env.REZUS_CONFIG;
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return join(base, 'rezus', 'config.yaml');
}

export async function loadConfig(path: string): Promise<CliConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { contexts: {} };
    throw err;
  }
  const parsed = readConfigValue(parse(text));
  if (typeof parsed === 'string') throw usageError(`${path}: not a rezus config (${parsed})`);
  return parsed;
}

/** The file holds tokens: written 0600 (directory 0700) and replaced atomically. */
export async function saveConfig(path: string, config: CliConfig): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, stringify(config), { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}

/** Which API to talk to: `--context`, else the current one; `REZUS_URL` + `REZUS_TOKEN` override both (CI). */
export function selectContext(config: CliConfig, name: string | undefined, env: NodeJS.ProcessEnv = process.env): CliContext & { name: string } {
  if (!name && env.REZUS_URL && env.REZUS_TOKEN) return { name: '(environment)', url: env.REZUS_URL, token: env.REZUS_TOKEN };
  const chosen = name ?? config.current;
  if (!chosen) throw usageError('not logged in: run `rezus login <url>` first (or set REZUS_URL and REZUS_TOKEN)');
  const ctx = config.contexts[chosen];
  if (!ctx) throw usageError(`no context named "${chosen}"; see \`rezus context list\``);
  return { name: chosen, ...ctx };
}
