import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { provisionJob } from '../functions/provision/job.ts';
import { upgradeJob } from '../functions/upgrade/job.ts';
import { executors } from '../runner/jobs/registry.ts';
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
    expect(Object.keys(registry).sort()).toEqual(['backup', 'bootstrap', 'collect', 'etcd-restore', 'etcd-snapshot', 'mesh-repush', 'provision', 'push-cluster', 'push-config', 'upgrade', 'upgrade-kubernetes']);
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
});
