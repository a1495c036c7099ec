// The state backend and run queue rules that keep state whole when runs race or end early:
// who may UNLOCK, same-serial conflicts, pruning, late writes of ended runs, deletable clusters,
// no events after the end, cancel reaching the executor at once, owner-only backups, scrubbed logs.
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { clearRunFiles, releaseLocksOfDeadRuns } from '../runner/jobs/registry.ts';
import { leaseOwnerIsGone, localWorkerId, workerIdOf } from '../runner/lease-owner.ts';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mintStateCredential } from '../functions/state/credentials.ts';
import { writeState, parseStateDocument } from '../functions/state/store.ts';
import { stopReason } from '../lib/jobs/executor.ts';
import { createLogger } from '../lib/log.ts';
import { errorMessage } from '../lib/errors.ts';
import { backupExecutor } from '../runner/jobs/backup/executor.ts';
import { ERRORED_STATE_FILE, storeErroredState } from '../runner/jobs/provision/errored-state.ts';
import { createWorker } from '../runner/worker.ts';
import { createHarness, seedCluster, untilAborted, type Harness } from './support/harness.ts';
import { basic, lockInfo, stateClient, stateDoc } from './support/state.ts';

let h: Harness;
let ids: { tenantId: string; clusterId: string };

beforeEach(async () => {
  h = await createHarness();
  ids = await seedCluster(h, 'alpha');
});
afterEach(async () => h.close());

async function client(runId: string) {
  const cred = await mintStateCredential(h.deps, { runId, ...ids, ttlMs: 60_000 });
  return stateClient(h, ids.tenantId, ids.clusterId, basic(cred));
}

const withMachine = { resources: [{ mode: 'managed', type: 'terraform_data', name: 'machine', instances: [{ attributes: {} }] }] };

async function runOf(kind = 'provision') {
  const run = await h.deps.jobs.enqueue({ kind, clusterId: ids.clusterId, tenantId: ids.tenantId, exclusive: true });
  return run;
}

describe('state backend semantics', () => {
  it('only the holding run may UNLOCK, re-LOCK or write; another run that knows the lock ID is refused, an admin force-unlock works', async () => {
    const holder = await client('run_holder');
    const other = await client('run_other');
    const info = lockInfo('holder');
    expect((await holder.lock(info)).status).toBe(200);
    // The ID is no secret: a refused locker gets it back in the 423.
    const refused = await other.lock(lockInfo('other'));
    expect(refused.status).toBe(423);
    expect(refused.json.ID).toBe(info.ID);
    expect((await other.unlock({ ...info })).status).toBe(409);
    // Nor does the ID take the lock or write under it.
    expect((await other.lock({ ...info })).status).toBe(423);
    const write = await other.post(stateDoc('lin', 1), `?ID=${info.ID}`);
    expect(write.status).toBe(409);
    expect(write.json.error.code).toBe('state_locked');
    expect((await other.del(`?ID=${info.ID}`)).status).toBe(409);
    expect((await holder.post(stateDoc('lin', 1), `?ID=${info.ID}`)).status).toBe(200);
    expect((await holder.lock(info)).status).toBe(200);
    expect((await h.call('GET', `/v1/clusters/${ids.clusterId}/state-lock`)).body.lock.heldBy).toBe('run_holder');
    expect((await h.call('DELETE', `/v1/clusters/${ids.clusterId}/state-lock`)).status).toBe(200);
    expect((await h.call('GET', `/v1/clusters/${ids.clusterId}/state-lock`)).body.lock).toBeNull();
    expect((await holder.lock(info)).status).toBe(200);
    expect((await holder.unlock(info)).status).toBe(200);
  });

  it('refuses a write with the stored serial but other content (409), keeps the stored body', async () => {
    const s = await client('run_a');
    const first = stateDoc('lin', 3, withMachine);
    expect((await s.post(first)).status).toBe(200);
    const clash = await s.post(stateDoc('lin', 3));
    expect(clash.status).toBe(409);
    expect(clash.json.error.code).toBe('serial_conflict');
    expect((await s.get()).text).toBe(first);
    expect((await s.post(first)).json).toMatchObject({ created: false });
  });

  it('keeps the newest N versions', async () => {
    const lineage = 'lin-prune';
    for (let serial = 1; serial <= 7; serial++) {
      const body = Buffer.from(stateDoc(lineage, serial));
      await writeState(h.deps, { ...ids, body, parsed: parseStateDocument(body)!, writtenBy: 'run_a', keepVersions: 3 });
    }
    const list = await h.call('GET', `/v1/clusters/${ids.clusterId}/state/versions`);
    expect(list.body.versions.map((v: { version: number }) => v.version)).toEqual([7, 6, 5]);
  });

  it('a late write of an ended run that lost its lock is kept as a hidden version, not dropped', async () => {
    const run = await runOf();
    await h.deps.jobs.claim({ workerId: 'w1', leaseMs: 1, kinds: ['provision'] });
    const late = await client(run.id);
    const info = lockInfo('late');
    expect((await late.lock(info)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 5));
    expect(await h.deps.jobs.reapExpired()).toEqual([run.id]);
    await h.call('DELETE', `/v1/clusters/${ids.clusterId}/state-lock`);
    const next = await client('run_next');
    expect((await next.lock(lockInfo('next'))).status).toBe(200);

    const body = stateDoc('lin', 1, withMachine);
    const res = await late.post(body, `?ID=${info.ID}`);
    expect(res.status).toBe(200);
    expect(res.json.recoverable).toBe(true);
    expect((await late.get()).status).toBe(204);
    const versions = (await h.call('GET', `/v1/clusters/${ids.clusterId}/state/versions`)).body.versions;
    expect(versions).toEqual([expect.objectContaining({ version: res.json.version, writtenBy: `late:${run.id}`, deleted: true })]);
    const admin = await h.app.request(`/v1/state/${ids.tenantId}/${ids.clusterId}?version=${res.json.version}`, { headers: { authorization: `Bearer ${h.adminToken}` } });
    expect(await admin.text()).toBe(body);
    // A run still going gets the ordinary refusal.
    const stranger = await client('run_stranger');
    expect((await stranger.post(stateDoc('lin', 2))).status).toBe(409);
  });

  it('a cluster whose state holds no resources (after destroy) can be deleted; one with resources cannot', async () => {
    const s = await client('run_a');
    await s.post(stateDoc('lin', 1, withMachine));
    expect((await h.call('DELETE', `/v1/clusters/${ids.clusterId}`)).status).toBe(409);
    await s.post(stateDoc('lin', 2));
    expect((await h.call('DELETE', `/v1/clusters/${ids.clusterId}`)).status).toBe(204);
  });
});

describe('runs end once', () => {
  it('nothing is appended to a run after its terminal event; the worker of a reaped run learns it lost the run', async () => {
    const run = await runOf('sleepy');
    let sawAbort: string | undefined;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const worker = createWorker({
      deps: h.deps,
      workerId: 'w-paused',
      leaseMs: 60_000,
      concurrency: 1,
      pollMs: 20,
      executors: {
        sleepy: async ({ emit, signal }) => {
          await emit({ type: 'step', message: 'before' });
          await gate;
          await emit({ type: 'step', message: 'after the run was reaped' });
          sawAbort = stopReason(signal);
          return 'done';
        },
      },
    });
    worker.start();
    try {
      await expect.poll(async () => (await h.deps.jobs.events(run.id)).some((e) => e.message === 'before')).toBe(true);
      // A peer reaps the run, as if this worker had been paused past its lease.
      await h.deps.database.client.execute({ sql: 'UPDATE runs SET lease_expires_at = 0 WHERE id = ?', args: [run.id] });
      expect(await h.deps.jobs.reapExpired()).toEqual([run.id]);
      release();
      await expect.poll(() => sawAbort).toBe('lease-lost');
    } finally {
      await worker.stop(0);
    }
    const events = await h.deps.jobs.events(run.id);
    expect(events.at(-1)!.type).toBe('interrupted');
    expect(events.map((e) => e.message)).not.toContain('after the run was reaped');
    expect((await h.deps.jobs.get(run.id))!.state).toBe('interrupted');
    expect(await h.deps.jobs.finish(run.id, 'w-paused', { state: 'succeeded' })).toBe(false);
  });

  it('a cancel reaches the executor at once, and a run whose executor ignores it still ends canceled', async () => {
    const stubborn = await runOf('stubborn');
    let aborted = false;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const worker = createWorker({
      deps: h.deps,
      workerId: 'w1',
      // Heartbeats far apart: only the in-process bus can deliver the cancel in time.
      leaseMs: 600_000,
      concurrency: 1,
      pollMs: 60_000,
      executors: {
        stubborn: async ({ signal, emit }) => {
          await emit({ type: 'step', message: 'working' });
          void untilAborted(signal).then(() => (aborted = true));
          await gate;
          return 'finished anyway';
        },
      },
    });
    worker.start();
    try {
      await expect.poll(async () => (await h.deps.jobs.events(stubborn.id)).some((e) => e.type === 'step')).toBe(true);
      await h.call('POST', `/v1/runs/${stubborn.id}/cancel`);
      await expect.poll(() => aborted, { timeout: 1000 }).toBe(true);
      release();
      await expect.poll(async () => (await h.deps.jobs.get(stubborn.id))!.state).toBe('canceled');
    } finally {
      await worker.stop(0);
    }
  });
});

describe('a single runner paused past its lease (a suspended VM)', () => {
  it('stops its own run as lease-lost when it wakes, before it writes anything more', async () => {
    const run = await runOf('long');
    let reason: string | undefined;
    const worker = createWorker({
      deps: h.deps,
      workerId: 'w-suspended',
      leaseMs: 400,
      concurrency: 1,
      pollMs: 50,
      executors: {
        long: async ({ signal, emit }) => {
          await emit({ type: 'step', message: 'before the pause' });
          // The whole process stops: no timer, no heartbeat runs for longer than the lease.
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);
          await untilAborted(signal);
          reason = stopReason(signal);
          await emit({ type: 'step', message: 'after the pause' });
          return 'done';
        },
      },
    });
    worker.start();
    try {
      await expect.poll(() => reason, { timeout: 5000 }).toBe('lease-lost');
    } finally {
      await worker.stop(0);
    }
    const final = await h.deps.jobs.get(run.id);
    expect(final!.state).toBe('interrupted');
    const events = await h.deps.jobs.events(run.id);
    expect(events.at(-1)!.type).toBe('interrupted');
    expect(events.map((e) => e.message)).not.toContain('after the pause');
  });
});

describe('locks of interrupted runs', () => {
  it('stay while the run\'s process lives (paused, elsewhere) and go once it is seen dead on this host', async () => {
    const exited = execa('true');
    const dead = exited.pid!;
    await exited;
    const owners = { run_dead: `${hostname()}:${dead}`, run_alive: `${hostname()}:${process.ppid}`, run_remote: `elsewhere:${dead}` };
    for (const [name, owner] of Object.entries(owners)) {
      const other = await seedCluster(h, name.replace('_', '-'));
      const run = await h.deps.jobs.enqueue({ kind: 'provision', ...other, exclusive: true });
      await h.deps.database.client.execute({ sql: "UPDATE runs SET state = 'interrupted', lease_owner = ? WHERE id = ?", args: [owner, run.id] });
      const cred = await mintStateCredential(h.deps, { runId: run.id, ...other, ttlMs: 60_000 });
      expect((await stateClient(h, other.tenantId, other.clusterId, basic(cred)).lock(lockInfo(name))).status).toBe(200);
    }
    expect(await releaseLocksOfDeadRuns(h.deps)).toBe(1);
    const left = await h.deps.database.client.execute('SELECT info FROM state_locks');
    expect(left.rows.map((r) => JSON.parse(String(r.info)).Who).sort()).toEqual(['run_alive', 'run_remote']);
  });

  it('tell a runner restarted with the same pid (a container on the same host) from the one that held them', async () => {
    const me = localWorkerId();
    expect(me).toMatch(new RegExp(`^${hostname()}:${process.pid}@[0-9a-f]{8}\\.\\d+$`));
    expect(leaseOwnerIsGone(me)).toBe(false);
    // The same host and pid, an earlier start: the process that held the lease is not this one.
    const earlier = me.replace(/\.(\d+)$/, (_m, start: string) => `.${Number(start) - 1}`);
    expect(leaseOwnerIsGone(earlier)).toBe(true);
    // A live process of another pid, named with its incarnation as its own runner would: alive.
    const parentId = workerIdOf(process.ppid);
    expect(leaseOwnerIsGone(parentId)).toBe(false);
    // The same pid after its process was replaced (a pid reused): gone.
    expect(leaseOwnerIsGone(parentId.replace(/\.(\d+)$/, '.1'))).toBe(true);
  });
});

describe('errored.tfstate', () => {
  it('is stored as a state version and deleted', async () => {
    const run = await runOf();
    const workDir = join(h.deps.settings.dataDir, 'errored-work');
    await mkdir(workDir, { recursive: true });
    const body = stateDoc('lin', 4, withMachine);
    await writeFile(join(workDir, ERRORED_STATE_FILE), body);
    const stored = await storeErroredState(h.deps, { workDir, runId: run.id, ...ids });
    expect(stored).toEqual({ version: 1, recoverable: false });
    expect(await readdir(workDir)).toEqual([]);
    const admin = await h.app.request(`/v1/state/${ids.tenantId}/${ids.clusterId}`, { headers: { authorization: `Bearer ${h.adminToken}` } });
    expect(await admin.text()).toBe(body);
  });

  it('left in an ended run\'s directory, is stored before the directory goes; if it cannot be, the directory stays', async () => {
    const run = await runOf();
    const dir = join(h.deps.settings.dataDir, 'runs', run.id);
    await mkdir(join(dir, 'work'), { recursive: true });
    const body = stateDoc('lin', 7, withMachine);
    await writeFile(join(dir, 'work', ERRORED_STATE_FILE), body);
    // The database refuses the write: the file is all there is of that state, so nothing goes.
    await h.deps.database.client.execute("CREATE TRIGGER refuse_state BEFORE INSERT ON state_versions BEGIN SELECT RAISE(ABORT, 'injected failure'); END");
    await clearRunFiles(h.deps, run);
    expect(await readdir(join(dir, 'work'))).toEqual([ERRORED_STATE_FILE]);
    await h.deps.database.client.execute('DROP TRIGGER refuse_state');
    // A process still working there (the tofu of a dead runner, stopping): the directory waits.
    const inside = execa('sleep', ['30'], { cwd: join(dir, 'work'), reject: false });
    await clearRunFiles(h.deps, run);
    expect(await readdir(join(dir, 'work'))).toEqual([ERRORED_STATE_FILE]);
    inside.kill('SIGKILL');
    await inside;
    await clearRunFiles(h.deps, run);
    await expect(stat(dir)).rejects.toThrow(/ENOENT/);
    const admin = await h.app.request(`/v1/state/${ids.tenantId}/${ids.clusterId}`, { headers: { authorization: `Bearer ${h.adminToken}` } });
    expect(await admin.text()).toBe(body);
  });
});

describe('files and logs', () => {
  it('a backup is owner-only; one that fails leaves no .partial', async () => {
    const run = await runOf('backup');
    const ctx = { run, deps: h.deps, signal: new AbortController().signal, emit: async () => {} };
    const ok = (await backupExecutor(ctx, {})) as { file: string };
    expect((await stat(ok.file)).mode & 0o777).toBe(0o600);

    const dir = join(h.deps.settings.dataDir, 'backups');
    // A copy that fails once its thread has created the file (disk full, a source it cannot read):
    // what the thread wrote is removed, nothing is listed.
    const failing = { ...ctx, run: { ...run, id: 'run_fail' } };
    await mkdir(dir, { recursive: true });
    const names = await readdir(dir);
    const notADatabase = join(h.deps.settings.dataDir, 'not-a-database.db');
    await writeFile(notADatabase, 'half written '.repeat(400));
    await expect(backupExecutor({ ...failing, deps: { ...h.deps, database: { ...h.deps.database, url: `file:${notADatabase}` } } }, {})).rejects.toThrow(/not a database/);
    expect(await readdir(dir)).toEqual(names);
  });

  it('error messages and log lines carry the failed query, never its parameters', async () => {
    const secret = 'sealed-secret-value-4711';
    let caught: unknown;
    try {
      await h.deps.database.db.run((await import('drizzle-orm')).sql`INSERT INTO no_such_table VALUES (${secret})`);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeDefined();
    expect(errorMessage(caught)).not.toContain(secret);
    const lines: string[] = [];
    createLogger('info', (l) => lines.push(l)).error('worker tick failed', { error: String(caught) });
    expect(lines.join('\n')).not.toContain(secret);
    expect(lines.join('\n')).toContain('no_such_table');
  });
});
