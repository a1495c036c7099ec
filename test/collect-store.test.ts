import { eq } from 'drizzle-orm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { clusterHealth, healthSamples, machineHealth } from '../db/schema/index.ts';
import { storePassOutcomes, type ClusterOutcome } from '../runner/jobs/collect/store.ts';
import { createHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => {
  await h.close();
});

async function clusterWithMachine(tenant: string, name: string): Promise<{ clusterId: string; machineId: string }> {
  const c = await h.call('POST', '/v1/clusters', { body: { tenant, name, talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3', endpoint: 'https://127.0.0.1:6443' } });
  expect(c.status).toBe(201);
  const m = await h.call('POST', `/v1/clusters/${c.body.id}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'metal' } });
  expect(m.status).toBe(201);
  return { clusterId: c.body.id, machineId: m.body.id };
}

const outcome = (clusterId: string, machineId: string, at: number): ClusterOutcome => ({
  clusterId,
  at,
  skipped: [],
  kubeError: null,
  rollup: { state: 'healthy', reasons: [], kubernetesVersion: 'v1.36.3', talosVersions: ['v1.13.10'], etcd: null },
  machines: [
    {
      assessment: { id: machineId, name: 'cp1', role: 'controlplane', state: 'healthy', reasons: [], talosVersion: 'v1.13.10', kubernetesVersion: 'v1.36.3', samples: [{ metric: 'talos.up', value: 1 }] },
      reached: true,
      error: null,
      previousCpu: null,
    },
  ],
});

describe('storing a pass', () => {
  it('writes every cluster in one batch, and stores the others when one cluster cannot be stored', async () => {
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'home' } });
    const a = await clusterWithMachine(t.body.id, 'a');
    const b = await clusterWithMachine(t.body.id, 'b');
    const at = Date.parse('2026-12-01T10:00:00Z');

    expect((await storePassOutcomes(h.deps, [outcome(a.clusterId, a.machineId, at), outcome(b.clusterId, b.machineId, at)])).size).toBe(0);
    const m = await h.call('GET', `/v1/clusters/${a.clusterId}/machines/${a.machineId}`);
    expect(m.body.talosVersion).toBe('v1.13.10');

    // b's machine vanished under the pass: its rows violate the foreign key, a's still land.
    const gone = outcome(b.clusterId, 'no-such-machine', at + 60_000);
    const failed = await storePassOutcomes(h.deps, [outcome(a.clusterId, a.machineId, at + 60_000), gone]);
    expect([...failed.keys()]).toEqual([b.clusterId]);
    const rowA = await h.deps.db.select().from(clusterHealth).where(eq(clusterHealth.clusterId, a.clusterId)).get();
    const rowB = await h.deps.db.select().from(clusterHealth).where(eq(clusterHealth.clusterId, b.clusterId)).get();
    expect(rowA?.checkedAt).toBe(at + 60_000);
    expect(rowB?.checkedAt).toBe(at);
    const healthB = await h.deps.db.select().from(machineHealth).where(eq(machineHealth.machineId, b.machineId)).get();
    expect(healthB?.checkedAt).toBe(at);
  });
  it('stores the samples, replaces a sample of the same time, and leaves out values that are no number', async () => {
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'home' } });
    const a = await clusterWithMachine(t.body.id, 'a');
    const at = Date.parse('2026-12-01T10:00:00Z');
    const withSamples = (samples: { metric: string; value: number }[]): ClusterOutcome => {
      const o = outcome(a.clusterId, a.machineId, at);
      o.machines[0]!.assessment.samples = samples;
      return o;
    };
    expect((await storePassOutcomes(h.deps, [withSamples([{ metric: 'talos.up', value: 1 }, { metric: 'cpu.load1', value: 0.25 }, { metric: 'bad', value: Number.NaN }])])).size).toBe(0);
    expect((await storePassOutcomes(h.deps, [withSamples([{ metric: 'talos.up', value: 0 }])])).size).toBe(0);
    const rows = await h.deps.db.select().from(healthSamples).where(eq(healthSamples.machineId, a.machineId)).orderBy(healthSamples.metric);
    expect(rows).toEqual([
      { machineId: a.machineId, metric: 'cpu.load1', ts: at, value: 0.25 },
      { machineId: a.machineId, metric: 'talos.up', ts: at, value: 0 },
    ]);
  });
});
