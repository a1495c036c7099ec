import { afterEach, describe, expect, it } from 'vitest';
import type { Deps } from '../functions/context.ts';
import { upgradeJob } from '../functions/upgrade/job.ts';
import { upgradeExecutor } from '../runner/jobs/upgrade/executor.ts';
import { bind } from '../runner/jobs/registry.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { createHarness, type Harness } from './support/harness.ts';
import type { Json } from './support/api-caller.ts';
import { fleet, startUpgradeCluster, type MachineSpec, type UpgradeCluster } from './support/upgrade-cluster.ts';

const FROM = 'v1.13.2';
const TO = 'v1.13.9';
/** What the upgrade marks its own cordon with; operators may see and rely on the name. */
const CORDON_ANNOTATION = 'rezuscloud.io/cordoned-for-upgrade';

let h: Harness | undefined;
let worker: Worker | undefined;
let cluster: UpgradeCluster | undefined;

afterEach(async () => {
  await worker?.stop(0);
  await cluster?.stop();
  await h?.close();
  worker = undefined;
  cluster = undefined;
  h = undefined;
});

async function setup(machines: MachineSpec[], gateTimeoutMs = 2_000): Promise<{ h: Harness; c: UpgradeCluster }> {
  h = await createHarness({
    patchDeps: (d: Deps) => {
      d.settings.upgrade = { pollMs: 20, callDeadlineMs: 2_000, rebootTimeoutMs: 10_000, gateTimeoutMs, kubeDeadlineMs: 3_000 };
    },
  });
  cluster = await startUpgradeCluster(h, { talosVersion: FROM, machines });
  worker = createWorker({ deps: h.deps, executors: Object.fromEntries([bind(upgradeJob, upgradeExecutor)]), workerId: 'test', leaseMs: 5_000, concurrency: 1, pollMs: 20 });
  worker.start();
  return { h, c: cluster };
}

async function run(hh: Harness, c: UpgradeCluster, body: Record<string, unknown> = {}): Promise<{ run: Json; events: Json[] }> {
  const res = await hh.call('POST', `/v1/clusters/${c.clusterId}/upgrade`, { body: { talosVersion: TO, ...body } });
  expect(res.status).toBe(202);
  const id = res.body.run.id as string;
  for (let i = 0; i < 1200; i++) {
    const r = (await hh.call('GET', `/v1/runs/${id}`)).body;
    if (['succeeded', 'failed', 'canceled', 'interrupted'].includes(r.state)) return { run: r, events: (await hh.call('GET', `/v1/runs/${id}/events`)).body.events };
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`run ${id} did not finish`);
}

const seq = (evs: Json[], pred: (e: Json) => boolean): number => {
  const e = evs.find(pred);
  if (!e) throw new Error('no such event');
  return e.seq;
};

function workloads(c: UpgradeCluster, node: string): void {
  c.kube.setPod({ namespace: 'apps', name: `web-${node}`, nodeName: node, labels: { app: 'web' }, ownerKind: 'ReplicaSet' });
  c.kube.setPod({ namespace: 'apps', name: `cache-${node}`, nodeName: node, labels: { app: 'cache' }, ownerKind: 'StatefulSet', emptyDir: true });
  c.kube.setPod({ namespace: 'kube-system', name: `proxy-${node}`, nodeName: node, ownerKind: 'DaemonSet' });
  c.kube.setPod({ namespace: 'kube-system', name: `static-${node}`, nodeName: node, mirror: true });
}

describe('drained Talos upgrades', () => {
  it('cordons, evicts all but DaemonSet and mirror pods, reboots, then uncordons', async () => {
    const { h, c } = await setup(fleet(1, 1));
    workloads(c, 'w1');
    c.kube.setEvictionLatency(60);
    const { run: r, events } = await run(h, c);
    expect(r.error).toBeNull();
    expect(r.state).toBe('succeeded');

    const w1Writes = c.kube.writes.filter((w) => w.path.includes('w1'));
    // Cordon, the two evictions (concurrent, any order), uncordon.
    expect(w1Writes.map((w) => w.method)).toEqual(['PATCH', 'POST', 'POST', 'PATCH']);
    // The cordon carries the mark a later run uncordons by, and the uncordon removes it.
    expect(w1Writes[0]!.body).toEqual({ metadata: { annotations: { [CORDON_ANNOTATION]: 'true' } }, spec: { unschedulable: true } });
    expect(w1Writes.at(-1)!.body).toEqual({ metadata: { annotations: { [CORDON_ANNOTATION]: null } }, spec: { unschedulable: null } });
    expect(c.kube.nodeAnnotations('w1')).toEqual({});
    expect(new Set(w1Writes.slice(1, 3).map((w) => w.path))).toEqual(new Set(['/api/v1/namespaces/apps/pods/cache-w1/eviction', '/api/v1/namespaces/apps/pods/web-w1/eviction']));
    expect(c.kube.pods('w1').map((p) => p.name).sort()).toEqual(['proxy-w1', 'static-w1']);

    const w1 = (e: Json) => e.data?.node === 'w1';
    const drained = seq(events, (e) => w1(e) && e.type === 'upgrade.drain' && /^w1: drained: 2 evicted, 2 left in place/.test(e.message));
    const reboot = seq(events, (e) => w1(e) && e.type === 'upgrade.reboot');
    const uncordon = seq(events, (e) => w1(e) && e.type === 'upgrade.uncordon');
    const gate = seq(events, (e) => w1(e) && e.type === 'upgrade.gate');
    expect(drained).toBeLessThan(reboot);
    expect(reboot).toBeLessThan(uncordon);
    expect(uncordon).toBeLessThan(gate);
    const nodes = (await h.call('GET', `/v1/clusters/${c.clusterId}`)).body;
    expect(nodes.talosVersion).toBe(TO);
    expect(c.sim('w1').reboots).toEqual(['reboot']);
  });

  it('a disruption budget that never allows the eviction stops the run before the reboot, node left cordoned', async () => {
    const { h, c } = await setup(fleet(1, 2));
    workloads(c, 'w1');
    c.kube.setPdb({ namespace: 'apps', name: 'web-pdb', matchLabels: { app: 'web' }, disruptionsAllowed: 0 });
    const { run: r, events } = await run(h, c, { drainTimeout: '400ms' });
    expect(r.state).toBe('failed');
    expect(r.error).toMatch(/^w1: drain of w1 did not finish within 0s: apps\/web-w1 \(Cannot evict pod as it would violate the pod's disruption budget\.\); the node was not rebooted and is left cordoned$/);
    // The install ran (as talosctl does it) but no reboot, and the next worker was never touched.
    expect(c.sim('w1').calls.map((x) => x.method)).not.toContain('Reboot');
    expect(c.sim('w1').version).toBe(FROM);
    expect(c.sim('w2').calls.filter((x) => x.method === 'Reboot' || x.method.includes('/'))).toEqual([]);
    const refused = c.kube.writes.filter((w) => w.path === '/api/v1/namespaces/apps/pods/web-w1/eviction');
    // How many retries fit in the timeout depends on the machine's load; the retry itself is tested below.
    expect(refused.length).toBeGreaterThanOrEqual(1);
    const node = c.kube.writes.filter((w) => w.path === '/api/v1/nodes/w1');
    expect(node.map((w) => w.body)).toEqual([{ metadata: { annotations: { [CORDON_ANNOTATION]: 'true' } }, spec: { unschedulable: true } }]);
    expect(c.kube.nodeAnnotations('w1')).toEqual({ [CORDON_ANNOTATION]: 'true' });
    expect(events.some((e) => e.type === 'upgrade.drain' && e.level === 'error' && e.data?.remaining?.[0]?.name === 'web-w1')).toBe(true);
    expect((await h.call('GET', `/v1/clusters/${c.clusterId}`)).body.talosVersion).toBe(FROM);
  });

  it('retries a refused eviction until the budget allows it', async () => {
    const { h, c } = await setup(fleet(1, 1));
    workloads(c, 'w1');
    c.kube.setPdb({ namespace: 'apps', name: 'web-pdb', matchLabels: { app: 'web' }, disruptionsAllowed: 0 });
    const lift = (async () => {
      for (let i = 0; i < 2000; i++) {
        if (c.kube.writes.some((w) => w.path === '/api/v1/namespaces/apps/pods/web-w1/eviction')) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      await new Promise((r) => setTimeout(r, 150));
      c.kube.setPdb({ namespace: 'apps', name: 'web-pdb', matchLabels: { app: 'web' }, disruptionsAllowed: 1 });
    })();
    const { run: r, events } = await run(h, c, { drainTimeout: 20 });
    await lift;
    expect(r.state).toBe('succeeded');
    expect(events.some((e) => e.type === 'upgrade.drain' && e.data?.action === 'blocked')).toBe(true);
    expect(c.kube.pods('w1').map((p) => p.name)).not.toContain('web-w1');
  });

  it("waits as long as a refused eviction's Retry-After asks, and not past the drain's end", async () => {
    const { h, c } = await setup(fleet(1, 1));
    workloads(c, 'w1');
    c.kube.setPdb({ namespace: 'apps', name: 'web-pdb', matchLabels: { app: 'web' }, disruptionsAllowed: 1, processing: true });
    const started = Date.now();
    const { run: r } = await run(h, c, { drainTimeout: '1s' });
    expect(r.state).toBe('failed');
    expect(r.error).toMatch(/drain of w1 did not finish within 1s: apps\/web-w1 \(Cannot evict pod/);
    // One POST: the server asked for 10 s and the drain had 1 s (at the 20 ms poll, about fifty).
    expect(c.kube.writes.filter((w) => w.path === '/api/v1/namespaces/apps/pods/web-w1/eviction')).toHaveLength(1);
    // The drain still ended at its own end, not 10 s later.
    expect(Date.now() - started).toBeLessThan(8_000);
  });

  it("the health gate reads again no sooner than a throttled read's Retry-After asks", async () => {
    const { h, c } = await setup(fleet(1, 1), 8_000);
    // Back from its reboot, w1 meets an apiserver that turns five reads away, asking for a second.
    const off = c.sim('w1').onConfig(() => {
      off();
      c.kube.throttle(5, 1);
    });
    const { run: r } = await run(h, c);
    expect(r.error).toBeNull();
    expect(r.state).toBe('succeeded');
    // One health read makes four requests at once; the fifth refusal is the next read's, a second later.
    expect(c.kube.throttled).toHaveLength(5);
    expect(c.kube.throttled[4]! - c.kube.throttled[0]!).toBeGreaterThanOrEqual(950);
  });

  it('waits for the pods of a namespace being deleted instead of failing on the 403 their evictions get', async () => {
    const { h, c } = await setup(fleet(1, 1));
    workloads(c, 'w1');
    c.kube.setEvictionLatency(40);
    // The namespace controller gets to its pods only after the drain's first evictions were refused.
    c.kube.terminateNamespace('apps', { podsDeletedAfterMs: 60_000 });
    const controller = (async () => {
      for (let i = 0; i < 2000; i++) {
        if (c.kube.writes.some((w) => w.path.startsWith('/api/v1/namespaces/apps/') && w.path.endsWith('/eviction'))) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      await new Promise((r) => setTimeout(r, 100));
      c.kube.terminateNamespace('apps');
    })();
    const { run: r, events } = await run(h, c, { drainTimeout: 20 });
    await controller;
    expect(r.error).toBeNull();
    expect(r.state).toBe('succeeded');
    const refused = events.filter((e) => e.type === 'upgrade.drain' && e.data?.action === 'blocked');
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0]!.message).toMatch(/because it is being terminated/);
    expect(c.kube.pods('w1').map((p) => p.name).sort()).toEqual(['proxy-w1', 'static-w1']);
    expect(c.sim('w1').reboots).toEqual(['reboot']);
  });

  it('waits for pods already being deleted with their namespace', async () => {
    const { h, c } = await setup(fleet(1, 1));
    workloads(c, 'w1');
    c.kube.setEvictionLatency(400);
    c.kube.terminateNamespace('apps');
    const { run: r, events } = await run(h, c, { drainTimeout: 20 });
    expect(r.error).toBeNull();
    expect(events.some((e) => e.type === 'upgrade.drain' && e.data?.action === 'blocked')).toBe(false);
    expect(c.kube.pods('w1').map((p) => p.name).sort()).toEqual(['proxy-w1', 'static-w1']);
  });

  it('an eviction that fails stops the other pods\' retries with the drain', async () => {
    const { h, c } = await setup(fleet(1, 1));
    workloads(c, 'w1');
    c.kube.setPdb({ namespace: 'apps', name: 'web-pdb', matchLabels: { app: 'web' }, disruptionsAllowed: 0 });
    // Two budgets over one pod: the apiserver answers its eviction with a 500.
    c.kube.setPdb({ namespace: 'apps', name: 'cache-a', matchLabels: { app: 'cache' }, disruptionsAllowed: 1 });
    c.kube.setPdb({ namespace: 'apps', name: 'cache-b', matchLabels: { app: 'cache' }, disruptionsAllowed: 1 });
    const retries = (): number => c.kube.writes.filter((w) => w.path === '/api/v1/namespaces/apps/pods/web-w1/eviction').length;
    const { run: r } = await run(h, c, { drainTimeout: 20 });
    expect(r.state).toBe('failed');
    expect(r.error).toMatch(/more than one PodDisruptionBudget/);
    const atEnd = retries();
    await new Promise((resolve) => setTimeout(resolve, 300));
    // At a retry every 20 ms, a loop left running would have made about 15 more.
    expect(retries()).toBe(atEnd);
    expect(c.kube.pods('w1').map((p) => p.name)).toContain('web-w1');
  });

  it('an install that fails stops the drain where it is and gives the node back its pods', async () => {
    const { h, c } = await setup(fleet(1, 1));
    workloads(c, 'w1');
    c.kube.setPdb({ namespace: 'apps', name: 'web-pdb', matchLabels: { app: 'web' }, disruptionsAllowed: 0 });
    c.sim('w1').failInstall('installer: no space left on device');
    const { run: r } = await run(h, c, { drainTimeout: 20 });
    expect(r.state).toBe('failed');
    expect(r.error).toMatch(/no space left on device/);
    // At a retry every 20 ms, waiting out the 20 s drain would have refused hundreds of evictions.
    const refused = c.kube.writes.filter((w) => w.path === '/api/v1/namespaces/apps/pods/web-w1/eviction').length;
    expect(refused).toBeLessThan(50);
    const node = c.kube.writes.filter((w) => w.path === '/api/v1/nodes/w1');
    expect(node.at(-1)!.body).toMatchObject({ spec: { unschedulable: null } });
    expect(c.sim('w1').calls.map((x) => x.method)).not.toContain('Reboot');
  });

  it('a node someone else cordoned is drained as it is and stays cordoned; its gates do not hold the cordon against it', async () => {
    const { h, c } = await setup(fleet(1, 2));
    workloads(c, 'w1');
    c.kube.setNode('w1', { unschedulable: true });
    // Without force the pre-check refuses, naming the cordon.
    const refused = await run(h, c);
    expect(refused.run.state).toBe('failed');
    expect(refused.run.error).toMatch(/refusing to upgrade: cluster not healthy before .*w1: Kubernetes node cordoned \(unschedulable\)/);
    expect(c.kube.writes).toEqual([]);

    const { run: r, events } = await run(h, c, { force: true });
    expect(r.error).toBeNull();
    expect(r.state).toBe('succeeded');
    // No cordon PATCH (the node was cordoned) and no uncordon: only the evictions touched w1.
    const w1Writes = c.kube.writes.filter((w) => w.path.includes('w1'));
    expect(w1Writes.map((w) => w.method)).toEqual(['POST', 'POST']);
    expect(c.kube.pods('w1').map((p) => p.name).sort()).toEqual(['proxy-w1', 'static-w1']);
    expect(c.kube.nodeAnnotations('w1')).toEqual({});
    expect(c.kube.nodeUnschedulable('w1')).toBe(true);
    expect(c.kube.nodeUnschedulable('w2')).toBe(false);
    expect(events.some((e) => e.data?.node === 'w1' && e.type === 'upgrade.drain' && e.level === 'warn' && /already cordoned, not by an upgrade.*stays cordoned after/.test(e.message))).toBe(true);
    expect(events.some((e) => e.data?.node === 'w1' && e.type === 'upgrade.uncordon')).toBe(false);
    // The other worker is cordoned and uncordoned by the upgrade as usual.
    expect(c.kube.writes.filter((w) => w.path === '/api/v1/nodes/w2').map((w) => (w.body as Json).spec.unschedulable)).toEqual([true, null]);
    expect((await h.call('GET', `/v1/clusters/${c.clusterId}`)).body.talosVersion).toBe(TO);
  });

  it('a node already on the target that someone else cordoned is left cordoned, and the final check does not hold it against the cluster', async () => {
    const { h, c } = await setup([...fleet(1, 1), { name: 'w2', role: 'worker', version: TO }]);
    c.kube.setNode('w2', { unschedulable: true });
    const { run: r, events } = await run(h, c, { force: true });
    expect(r.error).toBeNull();
    expect(r.state).toBe('succeeded');
    expect(r.result.skipped).toEqual(['w2']);
    expect(c.kube.writes.filter((w) => w.path === '/api/v1/nodes/w2')).toEqual([]);
    expect(c.kube.nodeUnschedulable('w2')).toBe(true);
    expect(events.some((e) => e.type === 'upgrade.check')).toBe(true);
  });

  it('an install that fails on a node someone else cordoned leaves it cordoned', async () => {
    const { h, c } = await setup(fleet(1, 1));
    workloads(c, 'w1');
    c.kube.setNode('w1', { unschedulable: true });
    c.sim('w1').failInstall('installer: no space left on device');
    const { run: r } = await run(h, c, { force: true });
    expect(r.state).toBe('failed');
    expect(c.kube.writes.filter((w) => w.path === '/api/v1/nodes/w1')).toEqual([]);
    expect(c.kube.nodeUnschedulable('w1')).toBe(true);
  });

  it('drain: false leaves Kubernetes alone', async () => {
    const { h, c } = await setup(fleet(1, 1));
    workloads(c, 'w1');
    const { run: r } = await run(h, c, { drain: false });
    expect(r.state).toBe('succeeded');
    expect(c.kube.writes).toEqual([]);
    expect(c.kube.pods('w1')).toHaveLength(4);
  });

  it('upgrades the etcd leader last and has it forfeit leadership right before its reboot', async () => {
    const { h, c } = await setup(fleet(3, 0));
    for (const n of ['cp1', 'cp2', 'cp3']) c.sim(n).setEtcdLeader('1000'); // cp1 leads
    const { run: r, events } = await run(h, c);
    expect(r.error).toBeNull();
    expect(r.result.upgraded.map((u: Json) => u.name)).toEqual(['cp2', 'cp3', 'cp1']);
    expect(events.find((e) => e.type === 'upgrade.leader')?.data).toEqual({ leader: 'cp1' });
    const methods = c.sim('cp1').calls.map((x) => x.method);
    const forfeit = methods.indexOf('EtcdForfeitLeadership');
    expect(forfeit).toBeGreaterThan(methods.indexOf('LifecycleService/Upgrade'));
    expect(methods.indexOf('Reboot')).toBe(forfeit + 1);
    for (const n of ['cp2', 'cp3']) expect(c.sim(n).calls.map((x) => x.method)).not.toContain('EtcdForfeitLeadership');
    expect(seq(events, (e) => e.type === 'upgrade.forfeit' && e.data?.node === 'cp1')).toBeLessThan(seq(events, (e) => e.type === 'upgrade.reboot' && e.data?.node === 'cp1'));
  });
});
