import { describe, expect, it } from 'vitest';
import { ADDON_FIXED_ENV, addonOptionsToEnv } from '../runner/addon-options.ts';
import { loadConfig } from '../runner/config.ts';

describe('add-on options to runner environment', () => {
  it('defaults: data in /data, ingress port 8099, ingress trusted, and a configuration the runner accepts', () => {
    const env = addonOptionsToEnv({});
    expect(env).toEqual({
      REZUS_DATA_DIR: '/data',
      REZUS_HOST: '0.0.0.0',
      REZUS_PORT: '8099',
      REZUS_TRUST_INGRESS: 'true',
      REZUS_LOG_LEVEL: 'info',
      REZUS_COLLECT_CRON: '* * * * *',
      REZUS_RETENTION_RAW: '24h',
      REZUS_WORKER_CONCURRENCY: '4',
      REZUS_COLLECT_CONCURRENCY: '64',
      REZUS_SHUTDOWN_GRACE_S: '20',
    });
    expect(addonOptionsToEnv(null)).toEqual(env);
    const config = loadConfig(env);
    expect(config).toMatchObject({ dataDir: '/data', port: 8099, trustIngress: true, dbUrl: 'file:/data/rezus.db', retentionRawS: 86400 });
  });

  it('maps each option', () => {
    const key = 'ab'.repeat(32);
    const env = addonOptionsToEnv({
      log_level: 'warning',
      collect_cron: '*/30 * * * * *',
      retention_raw: '7d',
      worker_concurrency: 2,
      collect_concurrency: 16,
      shutdown_grace_s: 45,
      admin_token: 'a-long-admin-token-0123456789abcdef',
      master_key: key,
      database_url: 'libsql://rezus-home.example.turso.io',
      database_auth_token: 'db-token',
      backup_cron: '0 4 * * *',
      backup_keep: 3,
    });
    expect(env).toMatchObject({
      REZUS_BACKUP_CRON: '0 4 * * *',
      REZUS_BACKUP_KEEP: '3',
      REZUS_LOG_LEVEL: 'warn',
      REZUS_COLLECT_CRON: '*/30 * * * * *',
      REZUS_RETENTION_RAW: '7d',
      REZUS_WORKER_CONCURRENCY: '2',
      REZUS_COLLECT_CONCURRENCY: '16',
      REZUS_SHUTDOWN_GRACE_S: '45',
      REZUS_ADMIN_TOKEN: 'a-long-admin-token-0123456789abcdef',
      REZUS_MASTER_KEY: key,
      REZUS_DB_URL: 'libsql://rezus-home.example.turso.io',
      REZUS_DB_AUTH_TOKEN: 'db-token',
    });
    expect(loadConfig(env)).toMatchObject({ logLevel: 'warn', retentionRawS: 7 * 86400, shutdownGraceS: 45, dbUrl: 'libsql://rezus-home.example.turso.io', backupCron: '0 4 * * *', backupKeep: 3 });
    for (const [ha, ours] of [['trace', 'debug'], ['debug', 'debug'], ['notice', 'info'], ['error', 'error'], ['fatal', 'error']]) {
      expect(addonOptionsToEnv({ log_level: ha }).REZUS_LOG_LEVEL).toBe(ours);
    }
  });

  it('blank optional options are unset, and the fixed settings cannot be overridden', () => {
    const env = addonOptionsToEnv({ admin_token: '', master_key: null, database_url: '', backup_cron: '', backup_keep: null, REZUS_PORT: '1', data_dir: '/tmp' });
    expect(env).not.toHaveProperty('REZUS_BACKUP_CRON');
    expect(env).not.toHaveProperty('REZUS_BACKUP_KEEP');
    expect(env).not.toHaveProperty('REZUS_ADMIN_TOKEN');
    expect(env).not.toHaveProperty('REZUS_MASTER_KEY');
    expect(env).not.toHaveProperty('REZUS_DB_URL');
    expect(env).toMatchObject(ADDON_FIXED_ENV);
  });

  it.each([
    [{ log_level: 'loud' }, /^add-on option log_level: /],
    [{ collect_cron: 'every minute' }, /^add-on option collect_cron: must be a cron pattern/],
    [{ backup_cron: '61 * * * *' }, /^add-on option backup_cron: must be a cron pattern/],
    [{ backup_keep: 0 }, /^add-on option backup_keep: /],
    [{ retention_raw: '24 hours' }, /^add-on option retention_raw: must be a duration/],
    [{ retention_raw: '0h' }, /^add-on option retention_raw: must be a duration/],
    [{ worker_concurrency: 0 }, /^add-on option worker_concurrency: /],
    [{ worker_concurrency: 2.5 }, /^add-on option worker_concurrency: /],
    [{ collect_concurrency: '8' }, /^add-on option collect_concurrency: /],
    [{ shutdown_grace_s: 120 }, /^add-on option shutdown_grace_s: /],
    [{ admin_token: 'short' }, /^add-on option admin_token: must be at least 32 characters$/],
    [{ master_key: 'not-a-key' }, /^add-on option master_key: must be 32 bytes/],
    [{ database_url: 'http://db.example' }, /^add-on option database_url: must be a libsql:\/\/ or https:\/\/ URL$/],
    [{ database_auth_token: 'tok' }, /^add-on option database_auth_token: needs database_url$/],
    ['not an object', /^add-on option options: /],
  ])('rejects %j', (options, message) => {
    expect(() => addonOptionsToEnv(options)).toThrow(message);
  });

  it('never echoes a rejected secret', () => {
    const secret = 'zz-secret-value';
    expect(() => addonOptionsToEnv({ master_key: secret })).toThrow(/master_key/);
    try {
      addonOptionsToEnv({ master_key: secret });
    } catch (err) {
      expect(String(err)).not.toContain(secret);
    }
  });
});

describe('runner configuration', () => {
  it('REZUS_TRUST_INGRESS defaults to false and takes true/false/1/0 only', () => {
    expect(loadConfig({}).trustIngress).toBe(false);
    expect(loadConfig({ REZUS_TRUST_INGRESS: 'true' }).trustIngress).toBe(true);
    expect(loadConfig({ REZUS_TRUST_INGRESS: '1' }).trustIngress).toBe(true);
    expect(loadConfig({ REZUS_TRUST_INGRESS: '0' }).trustIngress).toBe(false);
    expect(() => loadConfig({ REZUS_TRUST_INGRESS: 'yes' })).toThrow(/REZUS_TRUST_INGRESS/);
  });
});

describe('add-on entry', () => {
  it('stops with exit code 2 and names the bad option before starting anything', async () => {
    const { execa } = await import('execa');
    const { mkdtemp, rm, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = await mkdtemp(join(tmpdir(), 'rezus-addon-'));
    try {
      const file = join(dir, 'options.json');
      await writeFile(file, JSON.stringify({ retention_raw: 'forever', admin_token: 'a-secret-admin-token-xyz-0123456789ab' }));
      const root = join(import.meta.dirname, '..');
      const res = await execa(process.execPath, ['dist/runner/addon-main.js'], {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', REZUS_ADDON_OPTIONS: file },
        extendEnv: false,
        reject: false,
        timeout: 20_000,
      });
      expect(res.exitCode).toBe(2);
      expect(res.stderr).toContain('add-on option retention_raw: must be a duration');
      expect(res.stderr + res.stdout).not.toContain('a-secret-admin-token-xyz-0123456789ab');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
