import { execa } from 'execa';
import { cleanUpAfterEach, MAIN, startRunner } from './support/runner-process.ts';
import { mkdtemp, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../runner/config.ts';
import { startCron } from '../runner/cron.ts';
import { createLogger } from '../lib/log.ts';

const { children, dirs } = cleanUpAfterEach();

describe('runner process', () => {
  it('first start mints the admin token once, 0600, and shuts down cleanly on SIGTERM', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'rezus-runner-'));
    dirs.push(dataDir);
    const env = { REZUS_DATA_DIR: dataDir, REZUS_PORT: '0', REZUS_HOST: '127.0.0.1' };
    const first = await startRunner(env);
    children.push(first.child);
    const tokenFile = join(dataDir, 'admin-token');
    const token = (await readFile(tokenFile, 'utf8')).trim();
    expect((await stat(tokenFile)).mode & 0o777).toBe(0o600);
    expect(first.output()).toContain(token);

    const res = await fetch(`${first.url}/v1/tenants`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);

    first.child.kill('SIGTERM');
    const result = await first.child;
    expect(result.exitCode).toBe(0);
    expect(result.all).toContain('runner stopped');

    const second = await startRunner(env);
    children.push(second.child);
    expect(second.output()).not.toContain(token);
    expect(second.output()).not.toContain('admin token created');
    const again = await fetch(`${second.url}/v1/tenants`, { headers: { authorization: `Bearer ${token}` } });
    expect(again.status).toBe(200);
  });

  it('takes the admin token from REZUS_ADMIN_TOKEN without writing one', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'rezus-runner-'));
    dirs.push(dataDir);
    const token = 'env-admin-token-0123456789abcdefghij';
    const r = await startRunner({ REZUS_DATA_DIR: dataDir, REZUS_PORT: '0', REZUS_HOST: '127.0.0.1', REZUS_ADMIN_TOKEN: token });
    children.push(r.child);
    await expect(stat(join(dataDir, 'admin-token'))).rejects.toThrow();
    expect(r.output()).not.toContain(token);
    expect((await fetch(`${r.url}/v1/tenants`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  });

  it('exits with a clear message on bad configuration', async () => {
    const res = await execa(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', REZUS_PORT: 'eighty' }, extendEnv: false, reject: false });
    expect(res.exitCode).toBe(2);
    expect(res.stderr).toMatch(/REZUS_PORT/);
  });
});

describe('config', () => {
  it('has embedded defaults', () => {
    const c = loadConfig({});
    expect(c.port).toBe(8080);
    expect(c.dbUrl).toMatch(/^file:.*\/data\/rezus\.db$/);
    expect(c.collectCron).toBe('* * * * *');
    expect(c.shutdownGraceS).toBe(30);
    expect(c.retentionRawS).toBe(86400);
  });
  it('reads overrides and rejects nonsense', () => {
    const c = loadConfig({ REZUS_DB_URL: 'libsql://db.example', REZUS_DB_AUTH_TOKEN: 't', REZUS_RETENTION_RAW: '90m' });
    expect(c).toMatchObject({ dbUrl: 'libsql://db.example', dbAuthToken: 't', retentionRawS: 5400 });
    expect(() => loadConfig({ REZUS_ADMIN_TOKEN: 'short' })).toThrow(/REZUS_ADMIN_TOKEN/);
    expect(() => loadConfig({ REZUS_RETENTION_RAW: 'forever' })).toThrow(/duration/);
  });
});

describe('cron', () => {
  it('a pattern it cannot read stops that job alone, named with its setting', async () => {
    const lines: string[] = [];
    let runs = 0;
    const cron = startCron(
      [
        { name: 'backup', pattern: '61 * * * *', setting: 'REZUS_BACKUP_CRON', run: async () => {} },
        { name: 'collect', pattern: '* * * * * *', setting: 'REZUS_COLLECT_CRON', run: async () => void runs++ },
      ],
      createLogger('warn', (l) => lines.push(l)),
    );
    try {
      for (let i = 0; i < 30 && runs === 0; i++) await new Promise((r) => setTimeout(r, 100));
      expect(runs).toBeGreaterThan(0);
      const refused = lines.map((l) => JSON.parse(l)).filter((l) => l.msg?.startsWith('schedule not started'));
      expect(refused).toHaveLength(1);
      expect(refused[0]).toMatchObject({ job: 'backup', setting: 'REZUS_BACKUP_CRON' });
      expect(refused[0].error).toMatch(/minute/);
    } finally {
      cron.stop();
    }
  });

  it('skips a tick while the previous run is still going', async () => {
    const lines: string[] = [];
    let running = 0;
    let maxConcurrent = 0;
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const cron = startCron(
      [
        {
          name: 'slow',
          pattern: '* * * * * *',
          run: async () => {
            runs++;
            running++;
            maxConcurrent = Math.max(maxConcurrent, running);
            await gate;
            running--;
          },
        },
      ],
      createLogger('warn', (l) => lines.push(l)),
    );
    try {
      for (let i = 0; i < 60 && !lines.some((l) => l.includes('skipped')); i++) await new Promise((r) => setTimeout(r, 100));
      expect(lines.some((l) => l.includes('cron tick skipped'))).toBe(true);
      expect(maxConcurrent).toBe(1);
      expect(runs).toBe(1);
    } finally {
      release();
      cron.stop();
    }
  });
});
