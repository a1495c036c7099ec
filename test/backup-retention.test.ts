// Backups that do not fill the disk: the free-space check before the copy, pruning to a count after
// it, the schedule, and deleting a backup through the API.
//
// The free space is faked through the host's backup files (deps.backups.freeBytes), the seam the
// runner itself fills with a statfs of the backups directory: a tmpfs small enough to refuse would
// need root (or a user namespace) to mount, and the executor cannot tell the fake from the host's.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdir, readdir, stat, statfs, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Deps } from '../functions/context.ts';
import type { BackupFiles } from '../functions/backup/files.ts';
import { backupJob, scheduledBackup } from '../functions/backup/job.ts';
import { backupExecutor } from '../runner/jobs/backup/executor.ts';
import { nodeBackupFiles } from '../runner/backup-files.ts';
import { bind, cronJobs } from '../runner/jobs/registry.ts';
import { startCron } from '../runner/cron.ts';
import { loadConfig } from '../runner/config.ts';
import { createLogger } from '../lib/log.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { createHarness, finishedRun, seedCluster, waitForRun, type Harness } from './support/harness.ts';

const MiB = 1024 * 1024;

let h: Harness | undefined;
let worker: Worker | undefined;
afterEach(async () => {
  await worker?.stop(0);
  worker = undefined;
  await h?.close();
  h = undefined;
});

const backupsDir = (d: Pick<Deps, 'settings'>) => join(d.settings.dataDir, 'backups');

/** A harness whose host keeps backup files as the runner does, changed by `patch`. */
async function harness(patch: (files: BackupFiles, d: Deps) => Partial<BackupFiles> = () => ({})) {
  h = await createHarness({
    patchDeps: (d) => {
      const files = nodeBackupFiles(backupsDir(d));
      d.backups = { ...files, ...patch(files, d) };
    },
  });
  return h;
}

function startWorker(hh: Harness) {
  worker = createWorker({ deps: hh.deps, executors: Object.fromEntries([bind(backupJob, backupExecutor)]), workerId: 'test', leaseMs: 3000, concurrency: 1, pollMs: 20 });
  worker.start();
}

async function backupNow(hh: Harness) {
  const res = await hh.call('POST', '/v1/backups');
  expect(res.status).toBe(202);
  return finishedRun(hh, res.body.run.id);
}

const eventsOf = async (hh: Harness, runId: string) => (await hh.call('GET', `/v1/runs/${runId}/events`)).body.events as Array<{ type: string; level: string; message: string; data: unknown }>;

/** Old backups in the backups directory, the first the newest, each a minute older than the one before. */
async function oldBackups(hh: Harness, names: string[], newestAt = Date.now() - 3_600_000): Promise<void> {
  const dir = backupsDir(hh.deps);
  await mkdir(dir, { recursive: true });
  for (const [i, name] of names.entries()) {
    await writeFile(join(dir, name), `old backup ${i}`);
    const at = new Date(newestAt - i * 60_000);
    await utimes(join(dir, name), at, at);
  }
}

describe('free space before the copy', () => {
  it('refuses at once, naming what is needed and what is free, and writes nothing', async () => {
    const hh = await harness(() => ({ freeBytes: async () => 10 * MiB }));
    startWorker(hh);
    const run = await backupNow(hh);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^not enough free space for a backup: it needs 1\d\d MiB \(the database and its WAL, [\d.]+ (KiB|MiB), and 128 MiB to spare\) and the file system of .*\/backups has 10 MiB free; nothing was written/);
    expect((await eventsOf(hh, run.id)).map((e) => e.type)).not.toContain('backup.start');
    // Not even the backups directory.
    await expect(stat(backupsDir(hh.deps))).rejects.toThrow(/ENOENT/);
  });

  it('copies when the file system has room for the database and the margin, and says what it measured', async () => {
    const hh = await harness(() => ({ freeBytes: async () => 200 * MiB }));
    startWorker(hh);
    const run = await backupNow(hh);
    expect(run.state).toBe('succeeded');
    const start = (await eventsOf(hh, run.id)).find((e) => e.type === 'backup.start')!;
    const space = start.data as { estimate: number; needed: number; free: number };
    expect(space.free).toBe(200 * MiB);
    expect(space.estimate).toBeGreaterThan(0);
    expect(space.needed).toBe(space.estimate + 128 * MiB);
  });

  it('measures a backups directory that does not exist yet on the file system it will be made on', async () => {
    const hh = await harness();
    const files = hh.deps.backups!;
    await expect(stat(backupsDir(hh.deps))).rejects.toThrow(/ENOENT/);
    const parent = await statfs(hh.dir);
    const free = await files.freeBytes();
    // The same file system as the data directory's; other tests write to it meanwhile.
    expect(Math.abs(free - parent.bavail * parent.bsize)).toBeLessThan(256 * MiB);
    expect(free).toBeGreaterThan(0);
  });
});

describe('pruning to a count', () => {
  it('keeps the newest REZUS_BACKUP_KEEP backups, the new one included, and deletes exactly the rest', async () => {
    const hh = await harness();
    hh.deps.settings.backupKeep = 3;
    const old = ['rezus-old-1.db', 'rezus-old-2.db', 'rezus-old-3.db', 'rezus-old-4.db', 'rezus-old-5.db'];
    await oldBackups(hh, old);
    // Not backups, or not finished ones: never pruned, however old.
    const dir = backupsDir(hh.deps);
    for (const other of ['rezus-old-9.db.partial', 'rezus-old-9.db.partial-journal', 'notes.txt']) {
      await writeFile(join(dir, other), 'x');
      await utimes(join(dir, other), new Date(0), new Date(0));
    }
    startWorker(hh);
    const run = await backupNow(hh);
    expect(run.state).toBe('succeeded');
    expect(run.params).toEqual({ keep: 3 });
    const written = (run.result.file as string).split('/').at(-1)!;
    expect(run.result).toMatchObject({ keep: 3, pruned: ['rezus-old-3.db', 'rezus-old-4.db', 'rezus-old-5.db'] });
    expect((await hh.call('GET', '/v1/backups')).body.backups.map((b: { name: string }) => b.name)).toEqual([written, 'rezus-old-1.db', 'rezus-old-2.db']);
    expect((await readdir(dir)).sort()).toEqual([written, 'notes.txt', 'rezus-old-1.db', 'rezus-old-2.db', 'rezus-old-9.db.partial', 'rezus-old-9.db.partial-journal'].sort());
    const pruned = (await eventsOf(hh, run.id)).find((e) => e.type === 'backup.pruned')!;
    expect(pruned).toMatchObject({ level: 'info', message: 'deleted 3 old backups (keeping 3): rezus-old-3.db, rezus-old-4.db, rezus-old-5.db' });
  });

  it('never deletes the backup just written, even when the clock makes it the oldest', async () => {
    const hh = await harness();
    hh.deps.settings.backupKeep = 2;
    await oldBackups(hh, ['rezus-future-1.db', 'rezus-future-2.db', 'rezus-future-3.db'], Date.now() + 86_400_000);
    startWorker(hh);
    const run = await backupNow(hh);
    expect(run.state).toBe('succeeded');
    expect(run.result.pruned).toEqual(['rezus-future-2.db', 'rezus-future-3.db']);
    expect((await hh.call('GET', '/v1/backups')).body.backups.map((b: { name: string }) => b.name)).toEqual(['rezus-future-1.db', (run.result.file as string).split('/').at(-1)]);
  });

  it('a prune that fails is a warning of a backup that succeeded', async () => {
    const hh = await harness(() => ({
      remove: async () => {
        throw new Error('EACCES: permission denied');
      },
    }));
    hh.deps.settings.backupKeep = 1;
    await oldBackups(hh, ['rezus-old-1.db']);
    startWorker(hh);
    const run = await backupNow(hh);
    expect(run.state).toBe('succeeded');
    expect(run.result.pruned).toEqual([]);
    const events = await eventsOf(hh, run.id);
    expect(events.map((e) => e.type)).toEqual(['queued', 'started', 'backup.start', 'backup.done', 'backup.prune.failed', 'succeeded']);
    expect(events.find((e) => e.type === 'backup.prune.failed')).toMatchObject({
      level: 'warn',
      message: 'old backups not deleted (keeping 1): rezus-old-1.db: EACCES: permission denied',
    });
  });
});

describe('scheduled backups', () => {
  it('REZUS_BACKUP_CRON is off unless set, REZUS_BACKUP_KEEP keeps 7 unless set', () => {
    expect(loadConfig({})).toMatchObject({ backupCron: '', backupKeep: 7 });
    expect(loadConfig({ REZUS_BACKUP_CRON: '30 2 * * *', REZUS_BACKUP_KEEP: '3' })).toMatchObject({ backupCron: '30 2 * * *', backupKeep: 3 });
    expect(() => loadConfig({ REZUS_BACKUP_KEEP: '0' })).toThrow(/^configuration: REZUS_BACKUP_KEEP: must be a whole number from 1 to 1000/);
  });

  it('queues a backup each tick, and skips a tick while a backup is still queued or running', async () => {
    const hh = await harness();
    expect(cronJobs(hh.deps).map((j) => j.name)).not.toContain('backup');
    hh.deps.settings.backupCron = '30 2 * * *';
    hh.deps.settings.backupKeep = 4;
    const lines: string[] = [];
    hh.deps.log = createLogger('warn', (l) => lines.push(l));
    const job = cronJobs(hh.deps).find((j) => j.name === 'backup')!;
    expect(job.pattern).toBe('30 2 * * *');

    await job.run();
    const queued = (await hh.call('GET', '/v1/runs')).body.runs.filter((r: { kind: string }) => r.kind === 'backup');
    expect(queued).toHaveLength(1);
    expect(queued[0]).toMatchObject({ state: 'queued', params: { keep: 4 } });
    expect((await hh.deps.jobs.get(queued[0].id))?.createdBy).toBe('cron');

    // Still queued: the next tick adds nothing, and neither does an admin's backup.
    expect(await scheduledBackup(hh.deps)).toBeUndefined();
    expect(lines.some((l) => l.includes('scheduled backup skipped: a backup is still queued or running'))).toBe(true);
    const manual = await hh.call('POST', '/v1/backups');
    expect(manual.status).toBe(409);
    expect(manual.body.error).toMatchObject({ code: 'run_active', details: { activeRun: queued[0].id } });

    startWorker(hh);
    expect((await waitForRun(hh, queued[0].id)).state).toBe('succeeded');
    const next = await scheduledBackup(hh.deps);
    expect(next).toMatchObject({ kind: 'backup', createdBy: 'cron' });
    expect((await waitForRun(hh, next!.id)).state).toBe('succeeded');
    expect((await hh.call('GET', '/v1/backups')).body.backups).toHaveLength(2);
  });

  it('the schedule runs on the cron host', async () => {
    const hh = await harness();
    hh.deps.settings.backupCron = '* * * * * *';
    const cron = startCron(
      cronJobs(hh.deps).filter((j) => j.name === 'backup'),
      createLogger('error', () => {}),
    );
    try {
      await expect.poll(async () => (await hh.call('GET', '/v1/runs')).body.runs.filter((r: { kind: string }) => r.kind === 'backup').length, { interval: 50, timeout: 5_000 }).toBe(1);
    } finally {
      cron.stop();
    }
  });

  it('a runner on a remote database skips the tick instead of queuing a backup that cannot run', async () => {
    const hh = await harness();
    const lines: string[] = [];
    const remote = { ...hh.deps, database: { ...hh.deps.database, local: false }, log: createLogger('warn', (l) => lines.push(l)) };
    expect(await scheduledBackup(remote)).toBeUndefined();
    expect(lines.some((l) => l.includes('scheduled backup skipped: backups are taken of the embedded database'))).toBe(true);
    expect((await hh.call('GET', '/v1/runs')).body.runs).toEqual([]);
  });
});

describe('DELETE /v1/backups/:name', () => {
  it('deletes a backup (204), audited; it is gone from the list and the download', async () => {
    const hh = await harness();
    startWorker(hh);
    const run = await backupNow(hh);
    const name = (run.result.file as string).split('/').at(-1)!;
    expect((await hh.call('GET', '/v1/backups')).body.backups.map((b: { name: string }) => b.name)).toEqual([name]);

    const res = await hh.call('DELETE', `/v1/backups/${name}`);
    expect(res.status).toBe(204);
    expect(res.body).toBeNull();
    expect((await hh.call('GET', '/v1/backups')).body.backups).toEqual([]);
    expect((await hh.call('GET', `/v1/backups/${name}`)).status).toBe(404);
    expect(await readdir(backupsDir(hh.deps))).toEqual([]);
    const audit = (await hh.call('GET', '/v1/audit')).body.entries as Array<{ action: string; target: string; actor: string }>;
    expect(audit.filter((e) => e.action === 'backup.delete')).toMatchObject([{ target: name, actor: 'env-admin' }]);

    const again = await hh.call('DELETE', `/v1/backups/${name}`);
    expect(again.status).toBe(404);
    expect(again.body.error).toEqual({ code: 'not_found', message: 'backup not found' });
  });

  it('answers 404 for unknown and bad names and touches nothing outside the backups', async () => {
    const hh = await harness();
    const dir = backupsDir(hh.deps);
    await mkdir(join(dir, 'rezus-dir.db'), { recursive: true });
    for (const name of ['rezus-a.db.partial', '.rezus-b.db', 'notes.txt']) await writeFile(join(dir, name), 'x');
    await writeFile(join(hh.dir, 'rezus-up.db'), 'x');
    const before = (await readdir(dir)).sort();
    for (const name of ['rezus-nope.db', 'rezus-a.db.partial', '.rezus-b.db', 'notes.txt', 'rezus-dir.db', '..%2Frezus.db', '..%2Frezus-up.db', '..%2Fmaster.key', '%2Fetc%2Fpasswd', 'rezus-..%2F..%2Fx.db']) {
      const res = await hh.call('DELETE', `/v1/backups/${name}`);
      // The route's own answer, not the app's for a route it does not serve.
      expect([name, res.status, res.body.error]).toEqual([name, 404, { code: 'not_found', message: 'backup not found' }]);
    }
    expect((await readdir(dir)).sort()).toEqual(before);
    expect((await stat(join(hh.dir, 'rezus-up.db'))).isFile()).toBe(true);
    expect((await stat(hh.dbFile)).isFile()).toBe(true);
  });

  it('is admin only: a tenant token gets 403 and the backup stays', async () => {
    const hh = await harness();
    await oldBackups(hh, ['rezus-kept.db']);
    const { tenantId } = await seedCluster(hh);
    const tok = await hh.call('POST', `/v1/tenants/${tenantId}/tokens`, { body: { name: 'x', scopes: ['read', 'write'] } });
    expect(tok.status).toBe(201);
    expect((await hh.call('DELETE', '/v1/backups/rezus-kept.db', { token: tok.body.token })).status).toBe(403);
    expect((await hh.call('DELETE', '/v1/backups/rezus-kept.db', { token: null })).status).toBe(401);
    expect((await hh.call('GET', '/v1/backups')).body.backups.map((b: { name: string }) => b.name)).toEqual(['rezus-kept.db']);
  });
});
