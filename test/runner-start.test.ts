import { execa } from 'execa';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { cleanUpAfterEach } from './support/runner-process.ts';

const ROOT = join(import.meta.dirname, '..');
const { children, dirs } = cleanUpAfterEach();

/** Child pids of a process (Linux: /proc/<pid>/task/<tid>/children). */
async function childPids(pid: number): Promise<string[]> {
  return (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8')).trim().split(/\s+/).filter(Boolean);
}

describe('npm start (scripts/start.mjs)', () => {
  it('runs the built runner in its own process from any directory, logging JSON lines only', async () => {
    const cwd = await mkdtemp(join(tmpdir(), 'rezus-start-'));
    dirs.push(cwd);
    // Plain node, no TypeScript loader; relative data dir: the data lands under the caller's cwd.
    const child = execa(process.execPath, [join(ROOT, 'scripts', 'start.mjs')], {
      cwd,
      env: { PATH: process.env.PATH ?? '', REZUS_DATA_DIR: 'data', REZUS_PORT: '0', REZUS_HOST: '127.0.0.1', REZUS_COLLECT_CRON: '0 0 1 1 *' },
      extendEnv: false,
      reject: false,
    });
    children.push(child);
    let err = '';
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`runner did not start:\n${err}`)), 20_000);
      child.stderr!.on('data', (d: Buffer) => {
        err += d.toString();
        const m = /"msg":"runner started","url":"http:\/\/[^:]+:(\d+)"/.exec(err);
        if (m) {
          clearTimeout(timer);
          resolve(`http://127.0.0.1:${m[1]}`);
        }
      });
      child.catch(reject);
    });
    // Migrations are read from dist/ next to the code, not from the cwd.
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    expect(await childPids(child.pid!)).toEqual([]);
    expect((await readFile(join(cwd, 'data', 'admin-token'), 'utf8')).trim()).toMatch(/^rzs_/);

    child.kill('SIGTERM');
    const result = await child;
    expect(result.exitCode).toBe(0);
    const lines = String(result.stderr).split('\n').filter((l) => l.trim() !== '');
    expect(lines.length).toBeGreaterThan(1);
    for (const l of lines) expect(() => JSON.parse(l), l).not.toThrow();
    expect(lines.at(-1)).toContain('runner stopped');
  });

  it('a process warning becomes a JSON log line instead of Node’s text', async () => {
    const script = `
      import { createLogger } from ${JSON.stringify(join(ROOT, 'lib', 'log.ts'))};
      import { routeProcessWarnings } from ${JSON.stringify(join(ROOT, 'lib', 'process-warnings.ts'))};
      routeProcessWarnings(createLogger('info'));
      process.emitWarning('too many things', { code: 'REZUS_TEST' });`;
    // dist/ is one bundle, so the two modules are loaded from source.
    const res = await execa(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, reject: false });
    expect(res.exitCode).toBe(0);
    const lines = res.stderr.split('\n').filter((l) => l.trim() !== '');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'warn', msg: 'process warning', name: 'Warning', code: 'REZUS_TEST', warning: 'too many things' });
  });
});
