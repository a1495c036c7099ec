import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';

export type TofuFlavor = 'tofu' | 'terraform';

export interface TofuBinary {
  path: string;
  flavor: TofuFlavor;
  version: string;
}

export class TofuBinaryNotFoundError extends Error {
  constructor(detail: string) {
    super(`No tofu binary found: ${detail}. Install OpenTofu (tofu) or Terraform, or set REZUS_TOFU_BIN.`);
    this.name = 'TofuBinaryNotFoundError';
  }
}

export interface ResolveOptions {
  /** Where REZUS_TOFU_BIN and PATH are read from; the caller decides (no process.env here). */
  env: Record<string, string | undefined>;
  timeoutMs?: number;
  signal?: AbortSignal;
}

async function isExecutableFile(file: string): Promise<boolean> {
  try {
    const s = await stat(file);
    if (!s.isFile()) return false;
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

async function findOnPath(name: string, pathVar: string | undefined): Promise<string | undefined> {
  for (const dir of (pathVar ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    if (await isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/** The binary named by REZUS_TOFU_BIN, else `tofu`, else `terraform` on PATH, with its version. */
export async function resolveTofuBinary(opts: ResolveOptions): Promise<TofuBinary> {
  const file = await locate(opts.env);
  return { path: file, ...(await cachedVersion(file, opts)) };
}

/** A PATH search stats a file in every directory; every run asks, and the answer rarely changes. */
const LOCATION_TTL_MS = 60_000;
const located = new Map<string, { file: string; at: number }>();

async function locate(env: ResolveOptions['env']): Promise<string> {
  const key = `${env.REZUS_TOFU_BIN ?? ''}\0${env.PATH ?? ''}`;
  const known = located.get(key);
  if (known && Date.now() - known.at < LOCATION_TTL_MS && (await isExecutableFile(known.file))) return known.file;
  const file = await search(env);
  located.set(key, { file, at: Date.now() });
  return file;
}

async function search(env: ResolveOptions['env']): Promise<string> {
  const override = env.REZUS_TOFU_BIN?.trim();
  if (override) {
    // A bare name is looked up on PATH, a path is used as is.
    const file = override.includes('/') ? path.resolve(override) : await findOnPath(override, env.PATH);
    if (!file || !(await isExecutableFile(file))) {
      throw new TofuBinaryNotFoundError(`REZUS_TOFU_BIN=${override} is not an executable file`);
    }
    return file;
  }
  const file = (await findOnPath('tofu', env.PATH)) ?? (await findOnPath('terraform', env.PATH));
  if (!file) throw new TofuBinaryNotFoundError('neither `tofu` nor `terraform` is on PATH');
  return file;
}

// `version -json` starts the binary (tens of milliseconds, more on a small box) on every run;
// the answer only changes when the file does.
const versions = new Map<string, Promise<{ flavor: TofuFlavor; version: string }>>();

async function cachedVersion(file: string, opts: Pick<ResolveOptions, 'timeoutMs' | 'signal'>): Promise<{ flavor: TofuFlavor; version: string }> {
  const st = await stat(file);
  const key = `${file}\0${st.mtimeMs}\0${st.size}\0${st.ino}`;
  let probe = versions.get(key);
  if (!probe) {
    probe = probeVersion(file, opts);
    versions.set(key, probe);
    // A failed probe (timeout, cancel) is asked again next time.
    probe.catch(() => versions.delete(key));
  }
  return probe;
}

export async function probeVersion(
  file: string,
  opts: Pick<ResolveOptions, 'timeoutMs' | 'signal'> = {},
): Promise<{ flavor: TofuFlavor; version: string }> {
  const result = await execa(file, ['version', '-json'], {
    env: { TF_IN_AUTOMATION: '1', CHECKPOINT_DISABLE: '1' },
    extendEnv: false,
    reject: false,
    timeout: opts.timeoutMs ?? 15_000,
    cancelSignal: opts.signal,
    stdin: 'ignore',
  });
  if (result.exitCode !== 0) {
    throw new TofuBinaryNotFoundError(`${file} version -json exited with ${result.exitCode ?? result.signal}`);
  }
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(String(result.stdout)) as Record<string, unknown>;
  } catch {
    throw new TofuBinaryNotFoundError(`${file} version -json did not print JSON`);
  }
  // OpenTofu keeps the `terraform_version` key for compatibility, so the key alone does not tell.
  const version = parsed.tofu_version ?? parsed.terraform_version;
  if (typeof version !== 'string') throw new TofuBinaryNotFoundError(`${file} reported no version`);
  const flavor: TofuFlavor =
    'tofu_version' in parsed || path.basename(file).toLowerCase().includes('tofu') ? 'tofu' : 'terraform';
  return { flavor, version };
}
