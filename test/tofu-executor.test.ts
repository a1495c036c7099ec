import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RunAbort } from '../lib/jobs/executor.ts';
import { runTofu } from '../lib/tofu/executor.ts';
import type { TofuMessage } from '../lib/tofu/messages.ts';
import { UnsupportedUiVersionError } from '../lib/tofu/messages.ts';
import { alive } from './support/processes.ts';

// These use small shell scripts standing in for tofu, to drive the executor into states a real
// run reaches only by chance (a process that ignores SIGINT, a stream that waits on us).
let dir: string;
const PATH = process.env.PATH ?? '/usr/bin:/bin';
const msg = (type: string, extra = '') =>
  `{"@level":"info","@message":"${type}","@module":"tofu.ui","@timestamp":"2026-01-01T00:00:00Z","type":"${type}"${extra}}`;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'rezus-tofu-exec-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function fakeTofu(name: string, body: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, `#!/bin/sh\n${body}\n`);
  await chmod(file, 0o755);
  return file;
}

/** An apply of `bin` aborted (with `reason`, if given) as soon as it announces apply_start. */
function applyStoppedAtStart(bin: string, graceMs: number, reason?: unknown) {
  const ac = new AbortController();
  return runTofu({ binary: bin, subcommand: 'apply', cwd: dir, dataDir: dir, pathEnv: PATH, signal: ac.signal, graceMs, onMessage: (m) => m.type === 'apply_start' && ac.abort(reason) });
}

/** Children a test left behind when it failed must not outlive it. */
const strays: number[] = [];
afterEach(() => {
  for (const pid of strays.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
});

async function pidIn(file: string): Promise<number> {
  const pid = Number((await readFile(file, 'utf8')).trim());
  strays.push(pid);
  return pid;
}

describe('runTofu', () => {
  it('delivers messages while the process is still running', async () => {
    const gate = path.join(dir, 'gate');
    // The script only finishes once the test has seen its first message and opened the gate.
    const bin = await fakeTofu(
      'streaming',
      `echo '${msg('version', ',"tofu":"1.9.0","ui":"1.2"')}'\nwhile [ ! -f ${gate} ]; do sleep 0.05; done\necho 'plain text line'\necho '${msg('log')}'`,
    );
    const seen: TofuMessage[] = [];
    const r = await runTofu({
      binary: bin,
      subcommand: 'plan',
      cwd: dir,
      dataDir: dir,
      pathEnv: PATH,
      timeoutMs: 20_000,
      onMessage: (m) => {
        seen.push(m);
        if (m.type === 'version') void writeFile(gate, '');
      },
    });
    expect(r.exitCode).toBe(0);
    expect(r.timedOut).toBe(false);
    expect(seen.map((m) => m.type)).toEqual(['version', 'log']);
    expect(r.textTail).toBe('plain text line\n');
  });

  it('passes fixed flags and arguments as an array, with no shell in between', async () => {
    const out = path.join(dir, 'argv.out');
    const bin = await fakeTofu('argv', `for a in "$@"; do echo "$a"; done > ${out}`);
    await runTofu({ binary: bin, subcommand: 'plan', args: ['-var-file=/a b/$(x)'], cwd: dir, dataDir: dir, pathEnv: PATH });
    expect((await readFile(out, 'utf8')).split('\n').filter(Boolean)).toEqual([
      'plan',
      '-input=false',
      '-no-color',
      '-json',
      '-var-file=/a b/$(x)',
    ]);
    await runTofu({ binary: bin, subcommand: 'output', cwd: dir, dataDir: dir, pathEnv: PATH });
    expect((await readFile(out, 'utf8')).split('\n').filter(Boolean)).toEqual(['output', '-no-color', '-json']);
  });

  it('escalates to SIGKILL when tofu ignores SIGINT past the grace period', async () => {
    const ready = path.join(dir, 'ready-stubborn');
    const bin = await fakeTofu('stubborn', `trap '' INT\necho '${msg('apply_start')}'\ntouch ${ready}\nwhile true; do sleep 0.05; done`);
    const r = await applyStoppedAtStart(bin, 300);
    expect(r.canceled).toBe(true);
    expect(r.forceKilled).toBe(true);
  });

  it('stops with SIGINT only when tofu exits within the grace period', async () => {
    const bin = await fakeTofu(
      'polite',
      `trap 'echo "${'interrupted'}" >&2; exit 1' INT\necho '${msg('apply_start')}'\nwhile true; do sleep 0.05; done`,
    );
    const r = await applyStoppedAtStart(bin, 20_000);
    expect(r).toMatchObject({ canceled: true, forceKilled: false, exitCode: 1 });
    expect(r.stderrTail).toContain('interrupted');
  });

  it('does not start when the signal is already aborted', async () => {
    const marker = path.join(dir, 'started');
    const bin = await fakeTofu('never', `touch ${marker}`);
    const r = await runTofu({ binary: bin, subcommand: 'plan', cwd: dir, dataDir: dir, pathEnv: PATH, signal: AbortSignal.abort() });
    expect(r.canceled).toBe(true);
    expect(existsSync(marker)).toBe(false);
  });

  it('stops tofu when the abort lands while the data dir is being prepared', async () => {
    const finished = path.join(dir, 'finished-late-abort');
    const bin = await fakeTofu('late-abort', `sleep 3\ntouch ${finished}`);
    const ac = new AbortController();
    const run = runTofu({ binary: bin, subcommand: 'plan', cwd: dir, dataDir: path.join(dir, 'fresh-data'), pathEnv: PATH, signal: ac.signal, graceMs: 300 });
    // runTofu is now awaiting its data dir: the abort comes before tofu is spawned.
    ac.abort();
    const r = await run;
    expect(r.canceled).toBe(true);
    expect(existsSync(finished)).toBe(false);
  });

  it("a shutdown's bound cuts the grace short; the SIGKILL comes long before the full grace", async () => {
    const bin = await fakeTofu('stubborn-shutdown', `trap '' INT\necho '${msg('apply_start')}'\nwhile true; do sleep 0.05; done`);
    const started = performance.now();
    const r = await applyStoppedAtStart(bin, 8_000, new RunAbort('shutdown', 300));
    expect(r).toMatchObject({ canceled: true, forceKilled: true });
    expect(performance.now() - started).toBeLessThan(4_000);
  });

  it('sends SIGINT to tofu alone, which stops its own children; the SIGKILL after the grace takes them all', async () => {
    const interrupted = path.join(dir, 'child-interrupted');
    const pidFile = path.join(dir, 'interrupted-child.pid');
    // The child runs in the foreground, so its shell does not ignore SIGINT for it.
    const bin = await fakeTofu(
      'parent-int',
      `trap 'true' INT\necho '${msg('apply_start')}'\nsh -c 'echo $$ > ${pidFile}; trap "touch ${interrupted}; exit 0" INT; while true; do sleep 0.05; done' >/dev/null 2>&1`,
    );
    const r = await applyStoppedAtStart(bin, 500);
    expect(r).toMatchObject({ canceled: true, forceKilled: true });
    const child = await pidIn(pidFile);
    // tofu decides how its children stop (terraform cancels them and records the resource's end).
    expect(existsSync(interrupted)).toBe(false);
    await expect.poll(() => alive(child), { timeout: 5_000 }).toBe(false);
  });

  it("SIGKILL takes tofu's children along: none is left orphaned", async () => {
    const pidFile = path.join(dir, 'orphan.pid');
    // A child that ignores SIGINT and SIGTERM, as a local-exec command or a plugin may.
    const bin = await fakeTofu(
      'parent-kill',
      `trap '' INT\n(trap '' INT TERM; exec sleep 60) >/dev/null 2>&1 &\necho $! > ${pidFile}\necho '${msg('apply_start')}'\nwhile true; do sleep 0.05; done`,
    );
    const r = await applyStoppedAtStart(bin, 300);
    expect(r.forceKilled).toBe(true);
    const child = await pidIn(pidFile);
    await expect.poll(() => alive(child), { timeout: 5_000 }).toBe(false);
  });

  it('stops a stream that announces an unsupported UI version', async () => {
    const bin = await fakeTofu('future', `echo '${msg('version', ',"tofu":"9.0.0","ui":"2.0"')}'\nwhile true; do sleep 0.05; done`);
    const r = await runTofu({ binary: bin, subcommand: 'plan', cwd: dir, dataDir: dir, pathEnv: PATH, graceMs: 2_000 });
    expect(r.protocolError).toBeInstanceOf(UnsupportedUiVersionError);
  });

  it('keeps only a bounded tail of stderr', async () => {
    const bin = await fakeTofu('noisy', `i=0; while [ $i -lt 3000 ]; do echo "line $i ............................" >&2; i=$((i+1)); done`);
    const r = await runTofu({ binary: bin, subcommand: 'plan', cwd: dir, dataDir: dir, pathEnv: PATH });
    expect(r.stderrTail.length).toBeLessThanOrEqual(16 * 1024);
    expect(r.stderrTail).toContain('line 2999');
    expect(r.stderrTail).not.toContain('line 0 ');
  });

  it('reports a binary that cannot be started', async () => {
    const r = await runTofu({ binary: path.join(dir, 'no-such-tofu'), subcommand: 'plan', cwd: dir, dataDir: dir, pathEnv: PATH });
    expect(r.startError).toMatch(/no-such-tofu: ENOENT/);
    expect(r.exitCode).toBeUndefined();
  });
});
