import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startRunner, until } from './support/runner-process.ts';
import { httpCaller } from './support/api-caller.ts';

const TOKEN = 'crash-test-admin-token-0123456789';
// Two runner start-ups (up to 20 s each), three waits of up to UNTIL_MS and a tofu plan: on a
// loaded machine that is far beyond the suite's default 30 s. Each wait is bounded; the test's
// own limit is their sum, so a slow machine makes it slow, not red, and a real hang still ends.
const UNTIL_MS = 60_000;
const TEST_MS = 2 * 20_000 + 3 * UNTIL_MS + 30_000;
let dataDir: string | undefined;
let pids: number[] = [];

afterEach(async () => {
  for (const pid of pids) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  pids = [];
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

const api = (url: string, method: string, path: string, body?: unknown) => httpCaller(url, TOKEN)(method, path, { body });


describe('runner crash mid-apply', () => {
  it('marks the run interrupted after restart, frees the lock, and a later apply works', async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'rezus-crash-'));
    const env = { REZUS_DATA_DIR: dataDir, REZUS_PORT: '0', REZUS_HOST: '127.0.0.1', REZUS_ADMIN_TOKEN: TOKEN, REZUS_LEASE_S: '2' };
    const first = await startRunner(env);
    pids.push(first.child.pid!);

    const t = await api(first.url, 'POST', '/v1/tenants', { name: 'home' });
    const c = await api(first.url, 'POST', '/v1/clusters', {
      tenant: t.body.id,
      name: 'lab',
      endpoint: 'https://[2001:db8::1]:6443',
      providerSettings: { local: { apply_delay_seconds: 60 } },
    });
    await api(first.url, 'POST', `/v1/clusters/${c.body.id}/machines`, { name: 'cp1', role: 'controlplane', provider: 'local' });
    const run = (await api(first.url, 'POST', `/v1/clusters/${c.body.id}/provision`, { mode: 'apply' })).body.run;
    await until(async () => {
      const ev = await api(first.url, 'GET', `/v1/runs/${run.id}/events`);
      return ev.body.events.some((e: { type: string }) => e.type === 'tofu.apply_start') ? true : undefined;
    }, 'apply_start', UNTIL_MS);

    // The host dies: runner, tofu and its provisioner all at once.
    process.kill(-first.child.pid!, 'SIGKILL');
    await first.child;

    const second = await startRunner(env);
    pids.push(second.child.pid!);
    const ended = await until(async () => {
      const r = await api(second.url, 'GET', `/v1/runs/${run.id}`);
      return r.body.state === 'running' ? undefined : r.body;
    }, 'the crashed run to be reaped', UNTIL_MS);
    expect(ended.state).toBe('interrupted');
    // Its run directory held the machine configs: gone with the reap, not left for the next start.
    await until(async () => (existsSync(join(dataDir!, 'runs', run.id)) ? undefined : true), 'the run directory to go', UNTIL_MS);
    const lock = await api(second.url, 'GET', `/v1/clusters/${c.body.id}/state-lock`);
    expect(lock.status).toBe(200);
    expect(lock.body).toEqual({ lock: null });

    const retry = (await api(second.url, 'POST', `/v1/clusters/${c.body.id}/provision`, { mode: 'plan' })).body.run;
    const done = await until(async () => {
      const r = await api(second.url, 'GET', `/v1/runs/${retry.id}`);
      return ['queued', 'running'].includes(r.body.state) ? undefined : r.body;
    }, 'the retry', UNTIL_MS);
    expect(done.state, done.error).toBe('succeeded');
    expect(done.result.summary.add).toBe(1);
  }, TEST_MS);
});
