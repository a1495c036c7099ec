import { execa, type ResultPromise } from 'execa';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach } from 'vitest';

/** The built runner (test/support/build-dist.ts builds it before the suites run), started with plain node. */
export const MAIN = join(import.meta.dirname, '..', '..', 'dist', 'runner', 'main.js');

/**
 * Starts the real runner process (its own process group, so a test can kill it together with
 * the tofu it spawned, like a host crash) and resolves once it logs that it listens.
 */
export async function startRunner(env: Record<string, string>) {
  const child = execa(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', ...env }, extendEnv: false, reject: false, all: true, detached: true });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`runner did not start:\n${out}`)), 20_000);
    child.all!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /"msg":"runner started","url":"http:\/\/[^:]+:(\d+)"/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(`http://127.0.0.1:${m[1]}`);
      }
    });
    child.catch(reject);
  });
  return { child, url, output: () => out };
}

/**
 * The processes and directories tests register are killed and removed after each test, also when
 * an assertion failed, so no runner outlives its test.
 */
export function cleanUpAfterEach(): { children: ResultPromise[]; dirs: string[] } {
  const tracked = { children: [] as ResultPromise[], dirs: [] as string[] };
  afterEach(async () => {
    for (const c of tracked.children.splice(0)) c.kill('SIGKILL');
    for (const d of tracked.dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });
  return tracked;
}

/** Polls `fn` every 100 ms until it answers something other than undefined; fails naming `what` after `ms`. */
export async function until<T>(fn: () => Promise<T | undefined>, what: string, ms: number): Promise<T> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}
