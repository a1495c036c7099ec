// The runner's environment is read without a schema library (runner/config.ts): these pin the
// checks and messages a zod schema used to give, so a bad variable still stops the start by name.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../runner/config.ts';

describe('runner configuration from the environment', () => {
  it('names the variable and the accepted range of a bad number', () => {
    expect(() => loadConfig({ REZUS_PORT: 'eighty' })).toThrow('configuration: REZUS_PORT: must be a whole number from 0 to 65535, got "eighty"');
    expect(() => loadConfig({ REZUS_PORT: '65536' })).toThrow(/^configuration: REZUS_PORT: /);
    expect(() => loadConfig({ REZUS_PORT: '80.5' })).toThrow(/REZUS_PORT/);
    expect(() => loadConfig({ REZUS_PORT: '-1' })).toThrow(/REZUS_PORT/);
    expect(() => loadConfig({ REZUS_WORKER_CONCURRENCY: '0' })).toThrow(/REZUS_WORKER_CONCURRENCY: must be a whole number from 1 to 64/);
    expect(() => loadConfig({ REZUS_LEASE_S: '1' })).toThrow(/REZUS_LEASE_S/);
  });

  it('takes numbers in range, and an empty number as unset', () => {
    const c = loadConfig({ REZUS_PORT: '0', REZUS_LEASE_S: '2', REZUS_WORKER_CONCURRENCY: ' 64 ', REZUS_STATE_KEEP_VERSIONS: '100000', REZUS_SHUTDOWN_GRACE_S: '' });
    expect(c).toMatchObject({ port: 0, leaseMs: 2000, workerConcurrency: 64, stateKeepVersions: 100_000, shutdownGraceS: 30 });
  });

  it('accepts the four log levels only', () => {
    expect(loadConfig({ REZUS_LOG_LEVEL: 'debug' }).logLevel).toBe('debug');
    expect(loadConfig({}).logLevel).toBe('info');
    expect(() => loadConfig({ REZUS_LOG_LEVEL: 'verbose' })).toThrow('configuration: REZUS_LOG_LEVEL: must be one of debug, info, warn, error, got "verbose"');
  });

  it('reads durations and says which variable holds a bad one', () => {
    expect(loadConfig({ REZUS_COLLECT_DEADLINE: '3s', REZUS_RETENTION_RAW: '7d' })).toMatchObject({ collectDeadlineMs: 3000, retentionRawS: 7 * 86400 });
    expect(() => loadConfig({ REZUS_COLLECT_DEADLINE: '3' })).toThrow(/^configuration: REZUS_COLLECT_DEADLINE: not a duration/);
  });

  it('treats an empty optional value as unset, and never echoes a short admin token', () => {
    const c = loadConfig({ REZUS_DB_URL: '', REZUS_MASTER_KEY: '', REZUS_TOFU_BIN: '', REZUS_ADMIN_TOKEN: '' });
    expect(c.dbUrl).toMatch(/^file:.*\/rezus\.db$/);
    expect(c.masterKey).toBeUndefined();
    expect(c.tofuBin).toBeUndefined();
    expect(c.adminToken).toBeUndefined();
    const short = 'short-secret-token';
    let message = '';
    try {
      loadConfig({ REZUS_ADMIN_TOKEN: short });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toBe('configuration: REZUS_ADMIN_TOKEN: must be at least 32 characters');
    expect(message).not.toContain(short);
  });

  it('reports STUN server problems under their variable', () => {
    expect(() => loadConfig({ REZUS_MESH_STUN_SERVERS: 'nohost' })).toThrow(/^configuration: REZUS_MESH_STUN_SERVERS: STUN server "nohost" must be host:port/);
    expect(() => loadConfig({ REZUS_MESH_STUN_SERVERS: 'a.example:3478' })).toThrow(/^configuration: REZUS_MESH_STUN_SERVERS: give two STUN servers/);
  });
});
