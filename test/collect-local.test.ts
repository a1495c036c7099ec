import { eq } from 'drizzle-orm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { machines } from '../db/schema/index.ts';
import { runCollectPass } from '../runner/jobs/collect/pass.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';

let h: Harness;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => h.close());

describe('collect pass and the quick start’s local machines', () => {
  it('skips a provisioned local machine with a reason instead of dialling it, and the cluster does not turn red', async () => {
    const { clusterId } = await seedCluster(h);
    const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'local' } });
    expect(m.status).toBe(201);
    // As a provision run leaves it; a loopback port where nothing listens, so a dial would show as unreachable.
    await h.deps.db.update(machines).set({ state: 'provisioned', address: '127.0.0.1:1', ipv4: '192.0.2.10', ipv6: '2001:db8::10' }).where(eq(machines.id, m.body.id));

    const summary = await runCollectPass(h.deps);
    expect(summary).toMatchObject({ clusters: 1, machines: 0, reached: 0, states: { healthy: 0, degraded: 0, unreachable: 0, unknown: 0 } });
    const health = (await h.call('GET', `/v1/clusters/${clusterId}/health`)).body;
    expect(health.state).toBe('unknown');
    expect(health.reasons).toEqual(['local machines only: nothing to collect']);
    const cp1 = health.machines.find((x: { name: string }) => x.name === 'cp1');
    expect(cp1).toMatchObject({ state: 'unknown', reasons: ['local machine: nothing runs at its address, so it is not collected'] });
  });

  it('still collects the cluster’s other machines (a metal one at an unreachable loopback port shows as unreachable)', async () => {
    // Loopback endpoint: the pass dials the Kubernetes API too, and nothing may leave the machine.
    const { clusterId } = await seedCluster(h, 'home', { endpoint: 'https://127.0.0.1:1' });
    await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'local' } });
    const metal = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'w1', role: 'worker', provider: 'metal', address: '127.0.0.1:1' } });
    await h.deps.db.update(machines).set({ state: 'configured' }).where(eq(machines.id, metal.body.id));
    const summary = await runCollectPass(h.deps);
    expect(summary.machines).toBe(1);
    expect(summary.states.unreachable).toBe(1);
  });
});
