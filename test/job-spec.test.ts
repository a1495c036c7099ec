import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { provisionJob } from '../functions/provision/job.ts';
import { upgradeJob } from '../functions/upgrade/job.ts';
import { backupJob } from '../functions/backup/job.ts';
import type { JobSpec } from '../lib/jobs/spec.ts';
import { bindLazy, executors, jobSpecs } from '../runner/jobs/registry.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { waitForRun, createHarness, seedCluster, type Harness } from './support/harness.ts';

let h: Harness;
let worker: Worker | undefined;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => {
  await worker?.stop(0);
  worker = undefined;
  await h.close();
});


describe('job specs', () => {
  it('refuse params that do not fit before anything is queued', async () => {
    const { clusterId, tenantId } = await seedCluster(h);
    // @ts-expect-error: the type says what the schema says; this checks the schema at run time
    await expect(provisionJob.enqueue(h.deps.jobs, { mode: 'destroy-all', destroy: true }, { exclusive: true, clusterId, tenantId })).rejects.toThrow(/mode/);
    expect(await h.deps.jobs.list({})).toEqual([]);
  });

  it('every registered kind has an executor behind a spec, and a stored run with bad params fails before it runs', async () => {
    const registry = executors();
    expect(Object.keys(registry).sort()).toEqual(['backup', 'bootstrap', 'collect', 'etcd-defrag', 'etcd-restore', 'etcd-snapshot', 'mesh-repush', 'provision', 'push-cluster', 'push-config', 'sync-manifests', 'upgrade', 'upgrade-kubernetes']);
    const { clusterId, tenantId } = await seedCluster(h);
    // A row as an older runner (or a hand edit) may have left it: the upgrade executor must not see it.
    const run = await h.deps.jobs.enqueue({ kind: upgradeJob.kind, clusterId, tenantId, exclusive: true, params: { talosVersion: 'v1.13.9', batchSize: 0 } });
    worker = createWorker({ deps: h.deps, executors: registry, workerId: 'test', leaseMs: 3000, concurrency: 1, pollMs: 20 });
    worker.start();
    const done = await waitForRun(h, run.id);
    expect(done.state).toBe('failed');
    expect(done.error).toMatch(/^run params do not fit the upgrade job: /);
    const events = await h.deps.jobs.events(run.id);
    // Nothing but the queue's own bookkeeping happened: no upgrade step was reached.
    expect(events.map((e) => e.type).filter((t) => t.startsWith('upgrade'))).toEqual([]);
  });

  it('each kind the worker registers loads the spec of that kind, with its first run', async () => {
    const registry = executors();
    expect(Object.keys(jobSpecs).sort()).toEqual(Object.keys(registry).sort());
    for (const [kind, load] of Object.entries(jobSpecs)) expect((await load()).kind, kind).toBe(kind);
  });

  it('a lazily bound kind checks params once its spec is loaded, and fails a run whose spec is of another kind', async () => {
    const { tenantId } = await seedCluster(h);
    let executed = 0;
    const ok = bindLazy('backup', async () => backupJob, async () => async () => ++executed);
    // A loader that yields another kind's spec: only a cast gets it past the compiler.
    const wrong = bindLazy('backup', async () => ({ ...backupJob, kind: 'collect' }) as unknown as JobSpec<'backup', typeof backupJob.params>, async () => async () => ++executed);
    const good = await h.deps.jobs.enqueue({ kind: 'backup', tenantId, exclusive: false, params: {} });
    worker = createWorker({ deps: h.deps, executors: Object.fromEntries([ok]), workerId: 'test', leaseMs: 3000, concurrency: 1, pollMs: 20 });
    worker.start();
    expect((await waitForRun(h, good.id)).state).toBe('succeeded');
    const bad = await h.deps.jobs.enqueue({ kind: 'backup', tenantId, exclusive: false, params: { extra: 1 } });
    expect(await waitForRun(h, bad.id)).toMatchObject({ state: 'failed', error: expect.stringMatching(/^run params do not fit the backup job: /) as unknown });
    await worker.stop(0);
    worker = createWorker({ deps: h.deps, executors: Object.fromEntries([wrong]), workerId: 'test2', leaseMs: 3000, concurrency: 1, pollMs: 20 });
    worker.start();
    const mismatched = await h.deps.jobs.enqueue({ kind: 'backup', tenantId, exclusive: false, params: {} });
    expect(await waitForRun(h, mismatched.id)).toMatchObject({ state: 'failed', error: 'the backup entry of the registry loaded the spec of collect' });
    expect(executed).toBe(1);
  });
});
