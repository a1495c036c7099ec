import * as net from 'node:net';
import { eq } from 'drizzle-orm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { machines } from '../db/schema/index.ts';
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

const health = async (clusterId: string) => {
  const res = await h.call('GET', `/v1/clusters/${clusterId}/health`);
  expect(res.status).toBe(200);
  return res.body;
};
const machineOf = (body: { machines: { name: string }[] }, name: string) => body.machines.find((m) => m.name === name) as unknown as Record<string, unknown> & { reasons: string[] };

describe('collect pass against Talos and Kubernetes sims', () => {
  it('reports a healthy cluster with samples, versions and etcd, and skips unconfigured machines', async () => {
    fleet = await startSimCluster(h, {
      tenant: 'home',
      machines: [
        { name: 'cp1', role: 'controlplane', kube: { usage: { cpu: '500m', memory: '2Gi' } } },
        { name: 'w1', role: 'worker', kube: { usage: { cpu: '250m', memory: '1Gi' } } },
        { name: 'w2', role: 'worker', unconfigured: true },
      ],
    });
    const before = (await health(fleet.clusterId));
    expect(before.state).toBe('unknown');
    expect(before.reasons).toEqual(['not collected yet']);

    const summary = await runCollectPass(h.deps);
    expect(summary).toMatchObject({ clusters: 1, machines: 2, reached: 2, states: { healthy: 2, degraded: 0, unreachable: 0, unknown: 0 } });

    const body = await health(fleet.clusterId);
    expect(body.state).toBe('healthy');
    expect(body.reasons).toEqual([]);
    expect(body.kubernetesVersion).toBe('v1.36.3');
    expect(body.talosVersions).toEqual(['v1.13.9']);
    expect(body.etcd).toEqual({ expected: 1, members: 1, healthy: 1, learners: 0 });
    const cp1 = machineOf(body, 'cp1');
    expect(cp1).toMatchObject({ state: 'healthy', reasons: [], talosVersion: 'v1.13.9', kubernetesVersion: 'v1.36.3', lastError: null, lastSeenAt: body.checkedAt });
    // The sim reports memtotal 8148000 kB with 6900000 kB available.
    expect((cp1.latest as Record<string, number>)['memory.used_bytes']).toBe((8_148_000 - 6_900_000) * 1024);
    expect((cp1.latest as Record<string, number>)['etcd.db_size_bytes']).toBe(20_480_000);
    expect(machineOf(body, 'w1')).toMatchObject({ state: 'healthy' });
    expect(machineOf(body, 'w2')).toMatchObject({ state: 'unknown', reasons: ['not configured yet'], checkedAt: body.checkedAt });
    // Every per-node call reached each sim; etcd only on the control plane.
    const methods = (name: string) => new Set(fleet!.machines[name]!.sim!.calls.map((c) => c.method));
    expect(methods('cp1')).toEqual(new Set(['Version', 'Hostname', 'ServiceList', 'Memory', 'LoadAvg', 'SystemStat', 'DiskStats', 'EtcdMemberList', 'EtcdStatus', 'Mounts']));
    expect(methods('w1').has('EtcdStatus')).toBe(false);
    expect(fleet.machines['w1']!.sim!.calls.every((c) => c.roles.includes('os:admin'))).toBe(true);

    const m = await h.call('GET', `/v1/clusters/${fleet.clusterId}/machines/${fleet.machines['cp1']!.id}`);
    expect(m.body.talosVersion).toBe('v1.13.9');

    const samples = await h.call('GET', `/v1/clusters/${fleet.clusterId}/machines/${fleet.machines['w1']!.id}/samples?metric=kube.cpu_cores`);
    expect(samples.status).toBe(200);
    expect(samples.body.resolution).toBe('raw');
    expect(samples.body.points).toEqual([{ metric: 'kube.cpu_cores', ts: body.checkedAt, value: 0.25 }]);
  });

  // The harness's deadline (the runner's default, 2 s) on purpose: a shorter one made the healthy
  // node miss it too when the machine was busy.
  it('marks a black-holed node unreachable after one pass, with the error, and keeps the rest', async () => {
    fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'cp1', role: 'controlplane' }, { name: 'w1', role: 'worker' }] });
    await runCollectPass(h.deps);
    const first = await health(fleet.clusterId);
    expect(first.state).toBe('healthy');

    // Its channel is open from the first pass: the calls themselves go unanswered.
    fleet.machines['w1']!.sim!.blackhole(true);
    const summary = await runCollectPass(h.deps);
    expect(summary.states).toMatchObject({ healthy: 1, unreachable: 1 });
    const body = await health(fleet.clusterId);
    const w1 = machineOf(body, 'w1');
    expect(w1.state).toBe('unreachable');
    expect(w1.lastError).toMatch(/deadline/);
    expect(w1.reasons[0]).toMatch(/^Talos API unreachable: /);
    // Last seen stays at the pass that reached it; versions are kept.
    expect(w1.lastSeenAt).toBe(first.checkedAt);
    expect(w1.talosVersion).toBe('v1.13.9');
    expect(body.state).toBe('degraded');
    expect(body.reasons.some((r: string) => r.startsWith('w1: Talos API unreachable'))).toBe(true);
    expect(machineOf(body, 'cp1').state).toBe('healthy');
    const up = await h.call('GET', `/v1/clusters/${fleet.clusterId}/machines/${fleet.machines['w1']!.id}/samples?metric=talos.up`);
    expect(up.body.points.map((p: { value: number }) => p.value)).toEqual([1, 0]);
  });

  it('reports a node that never completes the handshake at the dial, without spending a read slot on it', async () => {
    // One read slot: the dead node's dial must not hold it, or cp1 would wait behind it.
    h.deps.settings.collectConcurrency = 1;
    fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'w1', role: 'worker' }, { name: 'cp1', role: 'controlplane' }] });
    const dead = fleet.machines['w1']!.sim!;
    dead.blackhole(true);
    const summary = await runCollectPass(h.deps);
    expect(summary.states).toMatchObject({ healthy: 1, unreachable: 1 });
    const body = await health(fleet.clusterId);
    const w1 = machineOf(body, 'w1');
    expect(w1.state).toBe('unreachable');
    expect(w1.lastError).toMatch(/connect .*deadline/);
    expect(w1.reasons[0]).toMatch(/^Talos API unreachable: /);
    // No connection came up, so no call ever reached it.
    expect(dead.calls).toEqual([]);
    expect(machineOf(body, 'cp1').state).toBe('healthy');
  });

  it('records a node whose dial failed outright as unreachable, without dialling it again for the read', async () => {
    // One read slot, held by cp1's slow read: w1's read, had it one, would come long after its failed dial.
    h.deps.settings.collectConcurrency = 1;
    fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'cp1', role: 'controlplane' }, { name: 'w1', role: 'worker' }] });
    fleet.machines['cp1']!.sim!.setLatency(800);
    // w1's address takes TCP and hangs up 300 ms later, mid-handshake.
    const accepted: net.Socket[] = [];
    const hangUp = net.createServer((socket) => {
      accepted.push(socket);
      socket.on('error', () => {});
      setTimeout(() => socket.destroy(), 300);
    });
    await new Promise<void>((resolve) => hangUp.listen(0, '127.0.0.1', resolve));
    try {
      const port = (hangUp.address() as net.AddressInfo).port;
      await h.deps.db.update(machines).set({ address: `127.0.0.1:${port}` }).where(eq(machines.id, fleet.machines['w1']!.id));
      const summary = await runCollectPass(h.deps);
      expect(summary.states).toMatchObject({ healthy: 1, unreachable: 1 });
      expect(accepted).toHaveLength(1);
      const w1 = machineOf(await health(fleet.clusterId), 'w1');
      expect(w1.state).toBe('unreachable');
      expect(w1.lastError).toMatch(/connect/);
    } finally {
      await new Promise<void>((resolve) => hangUp.close(() => resolve()));
    }
  });

  it('finishes the pass when a cluster has no credentials, reading the clusters that have them', async () => {
    // Reads wait until every cluster has queued its dials: a cluster that cannot dial must not hold them.
    fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'cp1', role: 'controlplane' }, { name: 'w1', role: 'worker' }] });
    const tenant = (await h.call('GET', `/v1/clusters/${fleet.clusterId}`)).body.tenant as string;
    const other = await h.call('POST', '/v1/clusters', {
      body: { tenant, name: 'c2', talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3', endpoint: 'https://127.0.0.1:6443' },
    });
    expect(other.status).toBe(201);
    const m = await h.call('POST', `/v1/clusters/${other.body.id}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'metal' } });
    expect(m.status).toBe(201);
    await h.call('PATCH', `/v1/clusters/${other.body.id}/machines/${m.body.id}`, { body: { address: '127.0.0.1:1' } });
    await h.deps.database.client.execute({ sql: "UPDATE machines SET state = 'configured' WHERE id = ?", args: [m.body.id] });
    await h.deps.database.client.execute({ sql: 'UPDATE clusters SET secrets_sealed = NULL WHERE id = ?', args: [other.body.id] });

    const summary = await runCollectPass(h.deps);
    expect(summary.clusters).toBe(2);
    // Without credentials nothing is known about the node: unknown, not unreachable.
    expect(summary).toMatchObject({ machines: 3, reached: 2, states: { healthy: 2, unknown: 1 } });
    const body = await health(other.body.id);
    expect(machineOf(body, 'cp1').lastError).toMatch(/no cluster credentials/);
  });

  it('reads a connected node only once every node of the pass is being dialled', async () => {
    // Two read slots, four dials: cp1 and three dead nodes dial first; when cp1 is up, w4 takes its
    // dial slot and w5 still waits for one, so cp1's read waits too, until w4 is up and w5 dialling.
    h.deps.settings.collectConcurrency = 2;
    h.deps.settings.collectDeadlineMs = 1_000;
    const names = ['cp1', 'w1', 'w2', 'w3', 'w4', 'w5'];
    fleet = await startSimCluster(h, { tenant: 'home', machines: names.map((name) => ({ name, role: name === 'cp1' ? ('controlplane' as const) : ('worker' as const) })) });
    const sim = (name: string) => fleet!.machines[name]!.sim!;
    for (const dead of ['w1', 'w2', 'w3', 'w5']) sim(dead).blackhole(true);
    // What w4 had accepted when cp1's first call arrived.
    const seen: number[] = [];
    const calls = sim('cp1').calls;
    const push = calls.push.bind(calls);
    calls.push = (...items) => {
      seen.push(sim('w4').handshakes.accepted);
      return push(...items);
    };
    const summary = await runCollectPass(h.deps);
    expect(summary.states).toMatchObject({ healthy: 2, unreachable: 4 });
    expect(seen[0]).toBe(1);
  });

  it('reports a missing etcd member as degraded with the reason', async () => {
    const onlyCp1 = [{ id: '101', hostname: 'cp1' }];
    fleet = await startSimCluster(h, {
      tenant: 'home',
      machines: [
        { name: 'cp1', role: 'controlplane', etcdMembers: onlyCp1 },
        { name: 'cp2', role: 'controlplane', etcdMembers: onlyCp1 },
      ],
    });
    await runCollectPass(h.deps);
    const body = await health(fleet.clusterId);
    expect(body.state).toBe('degraded');
    expect(body.reasons).toContain('etcd has 1/2 members');
    expect(body.etcd).toMatchObject({ expected: 2, members: 1 });
  });

  it('reports a NotReady Kubernetes node, and works without the metrics API', async () => {
    fleet = await startSimCluster(h, { tenant: 'home', metrics: false, machines: [{ name: 'cp1', role: 'controlplane' }, { name: 'w1', role: 'worker' }] });
    await runCollectPass(h.deps);
    let body = await health(fleet.clusterId);
    // No metrics.k8s.io: still healthy, readiness sampled, no usage samples.
    expect(body.state).toBe('healthy');
    expect(body.kubeError).toBeNull();
    expect(machineOf(body, 'w1').latest).toHaveProperty(['kube.ready'], 1);
    expect(machineOf(body, 'w1').latest).not.toHaveProperty(['kube.cpu_cores']);

    fleet.kube.setNode('w1', { ready: false });
    await runCollectPass(h.deps);
    body = await health(fleet.clusterId);
    expect(body.state).toBe('degraded');
    expect(body.reasons.some((r: string) => /^node w1 NotReady/.test(r))).toBe(true);
    const w1 = machineOf(body, 'w1');
    expect(w1.state).toBe('degraded');
    expect(w1.reasons.some((r) => r.startsWith('Kubernetes node NotReady'))).toBe(true);
    expect(w1.latest).toHaveProperty(['kube.ready'], 0);
    expect(machineOf(body, 'cp1').state).toBe('healthy');
  });

  it('records the Kubernetes API failure on the cluster when its endpoint does not answer', async () => {
    h.deps.settings.collectDeadlineMs = 400;
    fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'cp1', role: 'controlplane' }] });
    fleet.kube.blackhole(true);
    await runCollectPass(h.deps);
    const body = await health(fleet.clusterId);
    expect(body.state).toBe('degraded');
    expect(body.kubeError).toMatch(/deadline/);
    expect(body.reasons[0]).toMatch(/^Kubernetes API unreachable/);
    expect(JSON.stringify(body)).not.toMatch(/PRIVATE KEY|client-key-data/);
  });
});
