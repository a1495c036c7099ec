// Real runner processes, real terraform on modules/local: what an operator (SIGTERM, a paused
// VM, a second runner on the same data dir) or a user (cancel) does to a run in flight, and
// what must survive it. Outcomes only: run states, stored state versions, files on disk.
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { alive } from './support/processes.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startRunner, until } from './support/runner-process.ts';
import { httpCaller, type Json } from './support/api-caller.ts';

const TOKEN = 'nothing-lost-admin-token-0123456789abcdef';
let dataDir: string | undefined;
let pids: number[] = [];
/** Fake tofu processes, killed after each test whatever became of their runner. */
const tofuPids: number[] = [];

afterEach(async () => {
  for (const pid of pids) {
    for (const sig of ['SIGCONT', 'SIGKILL'] as const) {
      try {
        process.kill(-pid, sig);
      } catch {
        /* already gone */
      }
    }
  }
  pids = [];
  for (const pid of tofuPids.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
  dataDir = undefined;
});

const api = (url: string, method: string, path: string, body?: unknown) => httpCaller(url, TOKEN)(method, path, { body });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function runner(env: Record<string, string>) {
  const r = await startRunner(env);
  pids.push(r.child.pid!);
  return r;
}

async function setup(extraEnv: Record<string, string> = {}) {
  dataDir = await mkdtemp(join(tmpdir(), 'rezus-nl-'));
  return { REZUS_DATA_DIR: dataDir, REZUS_PORT: '0', REZUS_HOST: '127.0.0.1', REZUS_ADMIN_TOKEN: TOKEN, ...extraEnv };
}

async function localCluster(url: string, delay: number) {
  const t = await api(url, 'POST', '/v1/tenants', { name: 'home' });
  const c = await api(url, 'POST', '/v1/clusters', {
    tenant: t.body.id,
    name: 'lab',
    endpoint: 'https://[2001:db8::1]:6443',
    providerSettings: { local: { apply_delay_seconds: delay } },
  });
  expect(c.status, JSON.stringify(c.body)).toBe(201);
  await api(url, 'POST', `/v1/clusters/${c.body.id}/machines`, { name: 'cp1', role: 'controlplane', provider: 'local' });
  return { tenantId: t.body.id as string, clusterId: c.body.id as string };
}

/** How long a wait on the runner may take before the test fails naming it. */
const UNTIL_MS = 45_000;
const events = async (url: string, runId: string) => (await api(url, 'GET', `/v1/runs/${runId}/events`)).body.events as { type: string; seq: number }[];
const applyStarted = (url: string, runId: string) =>
  until(async () => ((await events(url, runId)).some((e) => e.type === 'tofu.apply_start') ? true : undefined), 'tofu apply_start', UNTIL_MS);
const ended = (url: string, runId: string) =>
  until(async () => {
    const r = await api(url, 'GET', `/v1/runs/${runId}`);
    return ['queued', 'running'].includes(r.body.state) ? undefined : r.body;
  }, `run ${runId} to end`, UNTIL_MS);

/** The managed resource instances of a stored state (admin tokens may read it). */
async function stateResources(url: string, tenantId: string, clusterId: string, version?: number) {
  const res = await api(url, 'GET', `/v1/state/${tenantId}/${clusterId}${version ? `?version=${version}` : ''}`);
  if (res.status === 204) return [];
  expect(res.status).toBe(200);
  return (res.body.resources as { type: string; name: string; instances: { status?: string }[] }[]).flatMap((r) =>
    r.instances.map((i) => `${r.type}.${r.name}${i.status === 'tainted' ? ' (tainted)' : ''}`),
  );
}

async function filesNamed(dir: string, name: string): Promise<string[]> {
  const found: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) if (e.name === name) found.push(join(e.parentPath, e.name));
  return found;
}

/**
 * A stand-in for tofu that takes its time to stop: its apply notes the SIGINT and goes on until
 * SIGKILL, and writes its pid where the test can find it. Enough of version and init for a run.
 */
async function slowToStopTofu(dir: string) {
  const file = join(dir, 'fake-tofu');
  const line = (type: string, extra = '') => `{"@level":"info","@message":"${type}","type":"${type}"${extra}}`;
  await writeFile(
    file,
    `#!/bin/sh
case "$1" in
  version) echo '{"terraform_version":"1.11.0","platform":"linux_amd64","provider_selections":{},"terraform_outdated":false}' ;;
  init) mkdir -p .terraform ;;
  apply)
    echo $$ > ${join(dir, 'tofu.pid')}
    trap 'touch ${join(dir, 'sigint')}' INT
    echo '${line('version', ',"terraform":"1.11.0","ui":"1.2"')}'
    echo '${line('apply_start')}'
    while true; do sleep 0.05; done ;;
esac
`,
  );
  await chmod(file, 0o755);
  return { file, pid: async () => Number((await readFile(join(dir, 'tofu.pid'), 'utf8')).trim()), sigintAt: async () => (await stat(join(dir, 'sigint'))).mtimeMs };
}


/** A runner (2 s grace) whose provision run is applying with slowToStopTofu. */
async function applyingWithSlowTofu() {
  const env = await setup({ REZUS_LEASE_S: '5', REZUS_SHUTDOWN_GRACE_S: '2' });
  const tofu = await slowToStopTofu(dataDir!);
  const r = await runner({ ...env, REZUS_TOFU_BIN: tofu.file });
  const { clusterId } = await localCluster(r.url, 0);
  const run = (await api(r.url, 'POST', `/v1/clusters/${clusterId}/provision`, { mode: 'apply' })).body.run;
  await applyStarted(r.url, run.id);
  const pid = await tofu.pid();
  tofuPids.push(pid);
  return { r, run, tofu, pid };
}

describe('nothing lost', { timeout: 90_000 }, () => {
  it('SIGTERM with a tofu slow to stop: tofu gets SIGINT halfway through REZUS_SHUTDOWN_GRACE_S, the runner is gone by its end', async () => {
    const env = await setup({ REZUS_SHUTDOWN_GRACE_S: '4', REZUS_LEASE_S: '5' });
    const tofu = await slowToStopTofu(dataDir!);
    const r = await runner({ ...env, REZUS_TOFU_BIN: tofu.file });
    const { clusterId } = await localCluster(r.url, 0);
    const run = (await api(r.url, 'POST', `/v1/clusters/${clusterId}/provision`, { mode: 'apply' })).body.run;
    await applyStarted(r.url, run.id);
    tofuPids.push(await tofu.pid());

    const sigterm = Date.now();
    r.child.kill('SIGTERM');
    await r.child;
    const exitedAfter = Date.now() - sigterm;
    const sigintAfter = (await tofu.sigintAt()) - sigterm;
    // Runs had the first half to finish; tofu had the rest to write its state, not a budget more.
    expect(sigintAfter).toBeGreaterThan(1_500);
    expect(sigintAfter).toBeLessThan(3_500);
    expect(exitedAfter).toBeLessThan(6_000);
    const second = await runner(env);
    expect((await api(second.url, 'GET', `/v1/runs/${run.id}`)).body.state).toBe('interrupted');
  });

  it('a runner killed with its process group takes its tofu along (after its grace), though tofu runs in a group of its own', async () => {
    const { r, tofu, pid } = await applyingWithSlowTofu();
    process.kill(-r.child.pid!, 'SIGKILL');
    await r.child;
    await until(async () => (await tofu.sigintAt().catch(() => undefined)) ?? undefined, 'tofu to get SIGINT', 10_000);
    await until(async () => (alive(pid) ? undefined : true), 'tofu to be gone', 15_000);
  });

  it('a runner killed alone: its tofu is stopped as a cancel stops it, SIGINT first and SIGKILL after the grace', async () => {
    const { r, run, tofu, pid } = await applyingWithSlowTofu();
    const started = (await api(r.url, 'GET', `/v1/runs/${run.id}/events`)).body.events.find((e: Json) => e.type === 'started');
    const runnerPid = Number(String(started.data.worker).split(':').at(-1)!.split('@')[0]);

    const killed = Date.now();
    process.kill(runnerPid, 'SIGKILL');
    // SIGINT at once: tofu may finish what it has under way and write errored.tfstate.
    await until(async () => (await tofu.sigintAt().catch(() => undefined)) ?? undefined, 'tofu to get SIGINT', 10_000);
    expect(alive(pid)).toBe(true);
    // This stand-in never stops by itself: the guard's SIGKILL comes after the grace.
    await until(async () => (alive(pid) ? undefined : true), 'tofu to be gone', 15_000);
    expect(Date.now() - killed).toBeGreaterThan(1_500);
  });

  it('SIGTERM during an apply: the backend serves until tofu exits, the run ends interrupted, its state is stored, files are owner-only', async () => {
    // 2 s: runs may finish for one, tofu has the other after its SIGINT to write its state.
    const env = await setup({ REZUS_SHUTDOWN_GRACE_S: '2', REZUS_LEASE_S: '5' });
    const first = await runner(env);
    const { tenantId, clusterId } = await localCluster(first.url, 60);
    const run = (await api(first.url, 'POST', `/v1/clusters/${clusterId}/provision`, { mode: 'apply' })).body.run;
    await applyStarted(first.url, run.id);

    first.child.kill('SIGTERM');
    await first.child;

    const second = await runner(env);
    const done = await api(second.url, 'GET', `/v1/runs/${run.id}`);
    expect(done.body.state).toBe('interrupted');
    // tofu's final upload reached the backend: the machine it created is in the stored state.
    expect(await stateResources(second.url, tenantId, clusterId)).toEqual(['terraform_data.machine (tainted)']);
    expect(await filesNamed(dataDir!, 'errored.tfstate')).toEqual([]);
    expect((await api(second.url, 'GET', `/v1/clusters/${clusterId}/state-lock`)).body).toEqual({ lock: null });
    for (const f of ['rezus.db', 'rezus.db-wal', 'rezus.db-shm']) expect((await stat(join(dataDir!, f))).mode & 0o777, f).toBe(0o600);
  });

  it('a runner paused longer than its lease: no second tofu writes the state meanwhile, its late state is stored, nothing follows the terminal event', async () => {
    const env = await setup({ REZUS_LEASE_S: '5' });
    const a = await runner(env);
    const { tenantId, clusterId } = await localCluster(a.url, 40);
    const first = (await api(a.url, 'POST', `/v1/clusters/${clusterId}/provision`, { mode: 'apply' })).body.run;
    await applyStarted(a.url, first.id);
    const b = await runner(env);
    // The worker id names the runner's own process (tsx runs it as a child of the pid we started).
    const started = (await api(a.url, 'GET', `/v1/runs/${first.id}/events`)).body.events.find((e: Json) => e.type === 'started');
    const runnerPid = Number(String(started.data.worker).split(':').at(-1)!.split('@')[0]);
    process.kill(runnerPid, 'SIGSTOP');
    const stoppedAt = Date.now();
    const reaped = await ended(b.url, first.id);
    expect(reaped.state).toBe('interrupted');
    // The reaped run's tofu is still applying: its lock stays, so this destroy must wait for it.
    expect((await api(b.url, 'GET', `/v1/clusters/${clusterId}/state-lock`)).body.lock.heldBy).toBe(first.id);
    const second = (await api(b.url, 'POST', `/v1/clusters/${clusterId}/provision`, { mode: 'apply', destroy: true }));
    expect(second.status, JSON.stringify(second.body)).toBe(202);
    await sleep(Math.max(0, 12_000 - (Date.now() - stoppedAt)));
    process.kill(runnerPid, 'SIGCONT');

    const after = await ended(b.url, second.body.run.id);
    const versions = (await api(b.url, 'GET', `/v1/clusters/${clusterId}/state/versions`)).body.versions as { version: number; writtenBy: string | null; createdAt: number; deleted: boolean }[];
    const byFirst = versions.filter((v) => v.writtenBy === first.id);
    const bySecond = versions.filter((v) => v.writtenBy === second.body.run.id);
    // The first tofu's write after it was reaped is stored, with the machine it created.
    const late = byFirst.find((v) => v.createdAt >= reaped.finishedAt);
    expect(late, JSON.stringify(versions)).toBeDefined();
    expect(await stateResources(b.url, tenantId, clusterId, late!.version)).toEqual(['terraform_data.machine (tainted)']);
    if (after.state === 'succeeded') {
      // The destroy ran only after the first tofu was done with the state.
      expect(Math.min(...bySecond.map((v) => v.version))).toBeGreaterThan(Math.max(...byFirst.map((v) => v.version)));
      expect(await stateResources(b.url, tenantId, clusterId)).toEqual([]);
    } else {
      expect(after.error).toMatch(/lock/i);
      expect(bySecond).toEqual([]);
    }
    const firstEvents = await events(b.url, first.id);
    expect(firstEvents.at(-1)!.type).toBe('interrupted');
    expect((await api(b.url, 'GET', `/v1/runs/${first.id}`)).body.state).toBe('interrupted');
  });

  it('a second runner on the same data dir keeps the first one\'s run files and clears ended ones; a cancel through it reaches the first runner\'s tofu', async () => {
    const env = await setup({ REZUS_LEASE_S: '5' });
    const a = await runner(env);
    const { tenantId, clusterId } = await localCluster(a.url, 60);
    const run = (await api(a.url, 'POST', `/v1/clusters/${clusterId}/provision`, { mode: 'apply' })).body.run;
    await applyStarted(a.url, run.id);
    // Leftovers of a crash: a run the database does not know, an older layout, a cut-short backup.
    await mkdir(join(dataDir!, 'runs', 'run_gone'), { recursive: true });
    await mkdir(join(dataDir!, 'runs', 'ten_x-cl_y-0000'), { recursive: true });
    await mkdir(join(dataDir!, 'backups'), { recursive: true });
    await writeFile(join(dataDir!, 'backups', 'rezus-x.db.partial'), 'half');

    const b = await runner(env);
    expect((await readdir(join(dataDir!, 'runs'))).sort()).toEqual([run.id]);
    expect(await readdir(join(dataDir!, 'backups'))).toEqual([]);

    const cancel = await api(b.url, 'POST', `/v1/runs/${run.id}/cancel`);
    expect(cancel.status).toBeLessThan(300);
    const done = await ended(b.url, run.id);
    expect(done.state).toBe('canceled');
    // tofu was interrupted, not killed: it stored what it had created and released its lock.
    expect(await stateResources(b.url, tenantId, clusterId)).toEqual(['terraform_data.machine (tainted)']);
    expect((await api(b.url, 'GET', `/v1/clusters/${clusterId}/state-lock`)).body).toEqual({ lock: null });
    await until(async () => ((await readdir(join(dataDir!, 'runs'))).length === 0 ? true : undefined), 'run files removed', 10_000);
  });
});
