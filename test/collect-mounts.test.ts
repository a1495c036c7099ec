import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCollectPass } from '../runner/jobs/collect/pass.ts';
import { createHarness, type Harness } from './support/harness.ts';
import { startSimCluster, type SimCluster } from './support/collect-fleet.ts';

let h: Harness;
let fleet: SimCluster | undefined;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => {
  await fleet?.stop();
  fleet = undefined;
  await h.close();
});

const GiB = 2 ** 30;

describe('collect pass reads MachineService/Mounts', () => {
  it('turns a nearly full /var into a reason and disk.var samples on the health API', async () => {
    fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'cp1', role: 'controlplane' }, { name: 'w1', role: 'worker' }] });
    fleet.machines['w1']!.sim!.mounts = [{ filesystem: '/dev/sda6', size: 50 * GiB, available: 2 * GiB, mountedOn: '/var' }];
    await runCollectPass(h.deps);

    const body = (await h.call('GET', `/v1/clusters/${fleet.clusterId}/health`)).body;
    const w1 = body.machines.find((m: { name: string }) => m.name === 'w1');
    expect(w1.reasons).toContain('/var 96% full');
    expect(w1.state).toBe('degraded');
    expect(w1.latest['disk.var.size_bytes']).toBe(50 * GiB);
    expect(w1.latest['disk.var.used_bytes']).toBe(48 * GiB);
    const cp1 = body.machines.find((m: { name: string }) => m.name === 'cp1');
    expect(cp1.reasons).toEqual([]);
    expect(cp1.latest['disk.var.used_bytes']).toBe(40 * GiB);

    const samples = await h.call('GET', `/v1/clusters/${fleet.clusterId}/machines/${fleet.machines['w1']!.id}/samples?metric=disk.var.used_bytes`);
    expect(samples.status).toBe(200);
    expect(samples.body.points).toEqual([{ metric: 'disk.var.used_bytes', ts: body.checkedAt, value: 48 * GiB }]);
  });
});
