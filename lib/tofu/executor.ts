import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { execa } from 'execa';
import { parseTofuLine } from './messages.ts';
import type { TofuMessage } from './messages.ts';

/** How each subcommand is driven: which fixed flags it accepts and what its stdout is. */
const SUBCOMMANDS = {
  init: { flags: ['-input=false', '-no-color'], stdout: 'text' },
  plan: { flags: ['-input=false', '-no-color', '-json'], stdout: 'stream' },
  apply: { flags: ['-input=false', '-no-color', '-json'], stdout: 'stream' },
  refresh: { flags: ['-input=false', '-no-color', '-json'], stdout: 'stream' },
  validate: { flags: ['-no-color', '-json'], stdout: 'document' },
  output: { flags: ['-no-color', '-json'], stdout: 'document' },
  show: { flags: ['-no-color', '-json'], stdout: 'document' },
  version: { flags: ['-json'], stdout: 'document' },
  fmt: { flags: ['-no-color'], stdout: 'text' },
} as const;

export type TofuSubcommand = keyof typeof SUBCOMMANDS;

export interface TofuExecOptions {
  binary: string;
  subcommand: TofuSubcommand;
  args?: string[];
  cwd: string;
  /** The plugin cache lives under it, shared by all work dirs. */
  dataDir: string;
  /** HOME for the child; defaults to cwd so no user dotfiles are read. */
  home?: string;
  /** PATH for the child (the caller's, passed explicitly). */
  pathEnv: string;
  /** Extra variables: provider credentials, TF_HTTP_USERNAME/PASSWORD. Nothing else is inherited. */
  env?: Record<string, string>;
  onMessage?: (m: TofuMessage) => void;
  signal?: AbortSignal;
  /** Time tofu gets after SIGINT to release its lock and write state before SIGKILL. */
  graceMs?: number;
  /** Overall deadline; reaching it cancels like an abort. */
  timeoutMs?: number;
}

export interface TofuExecResult {
  exitCode: number | undefined;
  canceled: boolean;
  timedOut: boolean;
  /** True when the grace period ran out and SIGKILL was needed. */
  forceKilled: boolean;
  /** Whole stdout for `document` subcommands (output, show, validate, version). */
  stdout: string;
  /** Bounded tails for error reports; may hold anything tofu printed, so scrub before showing. */
  stderrTail: string;
  textTail: string;
  /** A stream error such as an unsupported UI version; the run was stopped because of it. */
  protocolError?: Error;
  /** Set when the binary could not be started at all (e.g. ENOENT). */
  startError?: string;
}

const TAIL_LIMIT = 16 * 1024;
const DOCUMENT_LIMIT = 64 * 1024 * 1024;

class Tail {
  private buf = '';
  constructor(private readonly limit: number) {}
  push(line: string): void {
    this.buf += `${line}\n`;
    if (this.buf.length > this.limit) this.buf = this.buf.slice(this.buf.length - this.limit);
  }
  toString(): string {
    return this.buf;
  }
}

export function pluginCacheDir(dataDir: string): string {
  return path.join(dataDir, 'plugin-cache');
}

export function childEnv(opts: Pick<TofuExecOptions, 'cwd' | 'dataDir' | 'home' | 'pathEnv' | 'env'>): Record<string, string> {
  return {
    ...opts.env,
    PATH: opts.pathEnv,
    HOME: opts.home ?? opts.cwd,
    TF_IN_AUTOMATION: '1',
    TF_PLUGIN_CACHE_DIR: pluginCacheDir(opts.dataDir),
    // No CLI config file outside our control is read; without this a user's ~/.terraformrc
    // (or a TF_CLI_CONFIG_FILE it points to) could redirect provider installation.
    TF_CLI_CONFIG_FILE: path.join(opts.dataDir, 'tofurc'),
    CHECKPOINT_DISABLE: '1',
  };
}

// Data dirs already laid out by this process: every tofu command asks, and the answer only
// changes if someone deletes the directory underneath a running runner.
const preparedDataDirs = new Set<string>();

/** The shared plugin cache and an empty CLI config (so tofu does not warn about a missing one). */
export async function ensureDataDir(dataDir: string): Promise<void> {
  if (preparedDataDirs.has(dataDir)) return;
  await prepareDataDir(dataDir);
  preparedDataDirs.add(dataDir);
}

async function prepareDataDir(dataDir: string): Promise<void> {
  await mkdir(pluginCacheDir(dataDir), { recursive: true, mode: 0o700 });
  try {
    await writeFile(path.join(dataDir, 'tofurc'), '', { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

/**
 * A bound on the stop that whoever aborted put in the reason: the runner's shutdown has a fixed
 * budget (its RunAbort carries stopWithinMs). Read duck-typed so this module knows no runner.
 */
function stopBoundOf(reason: unknown): number | undefined {
  const ms = (reason as { stopWithinMs?: unknown } | null | undefined)?.stopWithinMs;
  return typeof ms === 'number' && ms >= 0 ? ms : undefined;
}

/**
 * tofu leads a process group of its own. SIGINT goes to tofu alone: it stops its plugins and
 * local-exec commands itself and records how the resource under way ended, which a SIGINT to the
 * whole group pre-empts (the command dies first, and tofu reports only the provisioner's failure).
 * SIGKILL goes to the group, so nothing tofu started outlives it.
 */
const interrupt = (pid: number | undefined): void => send(pid, 'SIGINT');
const killGroup = (pid: number | undefined): void => send(pid === undefined ? undefined : -pid, 'SIGKILL');

function send(target: number | undefined, sig: NodeJS.Signals): void {
  if (target === undefined) return;
  try {
    process.kill(target, sig);
  } catch {
    // It has exited already.
  }
}

// A group of its own is out of reach of a kill aimed at the runner's group (a terminal closing, a
// test or supervisor killing the group): without this, tofu and its children would outlive a
// runner killed that way, and nothing would stop them. The guard is outside both groups; when
// the runner dies, its end of the pipe closes and `read` fails: the guard stops tofu as a cancel
// does, SIGINT and the grace before SIGKILL, so tofu finishes what it has under way and
// leaves errored.tfstate (its backend died with the runner), which the next runner stores. A line
// on the pipe (tofu has exited) dismisses it.
const GUARD_SCRIPT = 'read -r _ || { kill -s INT "$1"; sleep "$2"; kill -s KILL -- "-$1"; }';

function guardGroup(pid: number, graceMs: number): { dismiss(): void } {
  const graceS = String(Math.max(1, Math.ceil(graceMs / 1000)));
  const guard = spawn('/bin/sh', ['-c', GUARD_SCRIPT, 'rezus-tofu-guard', String(pid), graceS], {
    detached: true,
    env: { PATH: '/usr/bin:/bin' },
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  // Without /bin/sh tofu still runs, only unguarded, as it did before it had a group of its own.
  guard.on('error', () => undefined);
  guard.stdin?.on('error', () => undefined);
  return { dismiss: () => guard.stdin?.end('\n') };
}

const notStarted = (): TofuExecResult => ({
  exitCode: undefined,
  canceled: true,
  timedOut: false,
  forceKilled: false,
  stdout: '',
  stderrTail: '',
  textTail: '',
});

/** Runs one tofu command with an argument array and a minimal environment, streaming its UI messages. */
export async function runTofu(opts: TofuExecOptions): Promise<TofuExecResult> {
  const spec = SUBCOMMANDS[opts.subcommand];
  const args = [opts.subcommand, ...spec.flags, ...(opts.args ?? [])];
  const graceMs = opts.graceMs ?? 60_000;

  await ensureDataDir(opts.dataDir);
  // Looked at after the await: an abort that lands while the data dir is prepared fires before
  // the listener below exists, and tofu would run to its end.
  if (opts.signal?.aborted) return notStarted();
  const child = execa(opts.binary, args, {
    cwd: opts.cwd,
    env: childEnv(opts),
    extendEnv: false,
    stdin: 'ignore',
    buffer: false,
    reject: false,
    // Cancellation is ours (SIGINT, grace, SIGKILL); execa must not add its own SIGTERM.
    forceKillAfterDelay: false,
    // Its own process group, so that the SIGKILL leaves none of its plugins and local-exec
    // commands orphaned. stdio stays piped and the child referenced; guardGroup covers the runner
    // dying first.
    detached: true,
  });
  const pid = child.pid;
  const guard = pid === undefined ? undefined : guardGroup(pid, graceMs);

  let canceled = false;
  let timedOut = false;
  let forceKilled = false;
  let protocolError: Error | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  let killAt = Number.POSITIVE_INFINITY;
  let stopping = false;
  let exited = false;

  // Once tofu has exited, whatever it left in its group (a command that ignored SIGINT) has
  // nobody left to wait for: it goes at once.
  child.once('exit', () => {
    exited = true;
    if (stopping) killGroup(pid);
    guard?.dismiss();
  });
  const forceKill = (): void => {
    if (exited) return;
    forceKilled = true;
    killGroup(pid);
  };
  /** SIGINT once, SIGKILL after withinMs; a tighter bound later (a shutdown during a timeout's stop) brings the SIGKILL forward. */
  const stop = (withinMs = graceMs): void => {
    if (exited) return killGroup(pid);
    const at = performance.now() + withinMs;
    if (at >= killAt) return;
    if (!stopping) interrupt(pid);
    stopping = true;
    killAt = at;
    clearTimeout(killTimer);
    killTimer = setTimeout(forceKill, withinMs);
  };
  const onAbort = (): void => {
    canceled = true;
    stop(Math.min(graceMs, stopBoundOf(opts.signal?.reason) ?? graceMs));
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  const deadline = opts.timeoutMs
    ? setTimeout(() => {
        timedOut = true;
        stop();
      }, opts.timeoutMs)
    : undefined;

  const stderrTail = new Tail(TAIL_LIMIT);
  const textTail = new Tail(TAIL_LIMIT);
  let stdout = '';

  const readStdout = new Promise<void>((resolve) => {
    if (!child.stdout) return resolve();
    if (spec.stdout === 'document') {
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', (chunk: string) => {
        if (stdout.length < DOCUMENT_LIMIT) stdout += chunk;
      });
      child.stdout.on('end', resolve);
      child.stdout.on('error', () => resolve());
      return;
    }
    const rl = createInterface({ input: child.stdout, crlfDelay: Infinity });
    rl.on('line', (line) => {
      if (spec.stdout === 'text') return textTail.push(line);
      let msg: TofuMessage | undefined;
      try {
        msg = parseTofuLine(line);
      } catch (err) {
        protocolError ??= err as Error;
        stop();
        return;
      }
      if (!msg) return textTail.push(line);
      if (protocolError) return;
      try {
        opts.onMessage?.(msg);
      } catch (err) {
        // A failing consumer must not leave tofu running unobserved.
        protocolError ??= err as Error;
        stop();
      }
    });
    rl.on('close', resolve);
  });
  const readStderr = new Promise<void>((resolve) => {
    if (!child.stderr) return resolve();
    const rl = createInterface({ input: child.stderr, crlfDelay: Infinity });
    rl.on('line', (line) => stderrTail.push(line));
    rl.on('close', resolve);
  });

  const result = await child;
  exited = true;
  await Promise.all([readStdout, readStderr]);
  if (killTimer) clearTimeout(killTimer);
  if (deadline) clearTimeout(deadline);
  opts.signal?.removeEventListener('abort', onAbort);

  // No exit code and no signal: the process never ran.
  const startError =
    result.failed && result.exitCode === undefined && !result.signal ? `${opts.binary}: ${result.code ?? 'spawn failed'}` : undefined;

  return {
    exitCode: result.exitCode,
    canceled,
    timedOut,
    forceKilled,
    stdout,
    stderrTail: stderrTail.toString(),
    textTail: textTail.toString(),
    ...(protocolError ? { protocolError } : {}),
    ...(startError ? { startError } : {}),
  };
}
