import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { parse, stringify } from 'yaml';
import { z } from 'zod';
import { usageError } from './exit.ts';

const contextSchema = z.object({ url: z.string().min(1), token: z.string().min(1) });
const configSchema = z.object({
  current: z.string().optional(),
  contexts: z.record(z.string(), contextSchema).default({}),
});

export type CliContext = z.infer<typeof contextSchema>;
export type CliConfig = z.infer<typeof configSchema>;

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
  const parsed = configSchema.safeParse(parse(text) ?? {});
  if (!parsed.success) throw usageError(`${path}: not a rezus config (${parsed.error.issues[0]?.message ?? 'invalid'})`);
  return parsed.data;
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
