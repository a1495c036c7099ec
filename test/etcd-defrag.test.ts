import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { clusters } from '../db/schema/index.ts';
import { executors } from '../runner/jobs/registry.ts';
import { createWorker } from '../runner/worker.ts';
import type { Json } from './support/api-caller.ts';
import { finishedRun, createHarness, type Harness } from './support/harness.ts';
import { fleet, startUpgradeCluster, stoppedAfterEach, type UpgradeCluster } from './support/upgrade-cluster.ts';

const started = stoppedAfterEach();

const MiB = 1024 ** 2;

async function setup(): Promise<{ h: Harness; c: UpgradeCluster; path: string }> {
  const h = (started.h = await createHarness({ patchDeps: (d) => void (d.settings.pushConfig = { callDeadlineMs: 2_000, readyTimeoutMs: 5_000, pollMs: 25 }) }));
  // Three control planes (etcd members 1000, 1001, 1002) and a worker.
  const c = (started.cluster = await startUpgradeCluster(h, { talosVersion: 'v1.13.9', machines: fleet(3, 1) }));
  started.worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'test', leaseMs: 5_000, concurrency: 1, pollMs: 20 });
  started.worker.start();
  return { h, c, path: `/v1/clusters/${c.clusterId}/etcd-defrag` };
}

const events = async (hh: Harness, runId: string): Promise<Json[]> => (await hh.call('GET', `/v1/runs/${runId}/events`)).body.events;

describe('etcd defragmentation', () => {
  it('defragments every member one at a time, the leader last, then disarms the space alarm', async () => {
    const { h, c, path } = await setup();
    const early = await h.call('POST', path);
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe('not_bootstrapped');
    await h.deps.db.update(clusters).set({ bootstrappedAt: Date.now() }).where(eq(clusters.id, c.clusterId));
    expect((await h.call('POST', path, { body: { surprise: 1 } })).status).toBe(400);
    const ro = await h.call('POST', `/v1/tenants/${c.tenantId}/tokens`, { body: { name: 'ro', scopes: ['read'] } });
    expect((await h.call('POST', path, { token: ro.body.token })).status).toBe(403);

    // The database reached its quota: etcd raised NOSPACE everywhere; each file is mostly free pages.
    for (const [i, cp] of ['cp1', 'cp2', 'cp3'].entries()) {
      const sim = c.sim(cp);
      sim.etcdDbSize = (2048 + i) * MiB;
      sim.etcdDbSizeInUse = 300 * MiB;
      sim.defragmentMs = 30;
      sim.etcdAlarms = [{ memberId: '1000', alarm: 'NOSPACE' }];
      // cp1 leads, so it goes last though it comes first by name.
      sim.setEtcdLeader('1000');
    }
    const res = await h.call('POST', path);
    expect(res.status).toBe(202);
    expect(res.body.run.kind).toBe('etcd-defrag');
    const run = await finishedRun(h, res.body.run.id);
    expect(run.state, run.error ?? '').toBe('succeeded');

    // One member at a time: each started after the previous one finished (the sims log when each began).
    const began = ['cp2', 'cp3', 'cp1'].map((n) => c.sim(n).defragmentations);
    expect(began.map((b) => b.length)).toEqual([1, 1, 1]);
    expect(began[1]![0]! - began[0]![0]!).toBeGreaterThanOrEqual(30);
    expect(began[2]![0]! - began[1]![0]!).toBeGreaterThanOrEqual(30);
    expect(c.sim('w1').calls.map((x) => x.method)).not.toContain('EtcdDefragment');
    const evs = await events(h, res.body.run.id);
    expect(evs.find((e) => e.type === 'etcd.defrag.plan').data.order).toEqual(['cp2', 'cp3', 'cp1']);
    expect(evs.filter((e) => e.type === 'etcd.defrag.done').map((e) => e.message)).toEqual(['cp2: 2.0 GiB → 300 MiB', 'cp3: 2.0 GiB → 300 MiB', 'cp1: 2.0 GiB → 300 MiB']);
    expect(run.result.defragmented[1]).toEqual({ name: 'cp3', before: 2050 * MiB, after: 300 * MiB });
    // Disarmed once, after the last member: the alarm is the cluster's, not a member's.
    expect(run.result.disarmed).toEqual([{ memberId: '1000', alarm: 'NOSPACE' }]);
    const disarms = ['cp1', 'cp2', 'cp3'].flatMap((n) => c.sim(n).calls.filter((x) => x.method === 'EtcdAlarmDisarm'));
    expect(disarms).toHaveLength(1);
    const lastDone = Math.max(...evs.filter((e) => e.type === 'etcd.defrag.done').map((e) => e.seq));
    expect(evs.find((e) => e.type === 'etcd.alarm.disarm').seq).toBeGreaterThan(lastDone);
  });

  it('touches nothing while a member does not answer or etcd reports corruption', async () => {
    const { h, c, path } = await setup();
    await h.deps.db.update(clusters).set({ bootstrappedAt: Date.now() }).where(eq(clusters.id, c.clusterId));
    await c.sim('cp2').stop();
    const down = await finishedRun(h, (await h.call('POST', path)).body.run.id);
    expect(down.state).toBe('failed');
    expect(down.error).toMatch(/^refusing to defragment: not every etcd member answers: cp2: /);
    for (const n of ['cp1', 'cp3']) expect(c.sim(n).defragmentations).toEqual([]);
    c.sims.delete('cp2');
    await h.call('DELETE', `/v1/clusters/${c.clusterId}/machines/${c.machineIds.get('cp2')}`);

    c.sim('cp1').etcdAlarms = [{ memberId: '1002', alarm: 'CORRUPT' }];
    const corrupt = await finishedRun(h, (await h.call('POST', path)).body.run.id);
    expect(corrupt.state).toBe('failed');
    expect(corrupt.error).toBe('refusing to defragment: etcd reports data corruption on member 1002; restore that member from a snapshot instead');
    for (const n of ['cp1', 'cp3']) {
      expect(c.sim(n).defragmentations).toEqual([]);
      expect(c.sim(n).calls.map((x) => x.method)).not.toContain('EtcdAlarmDisarm');
    }
  });
});
