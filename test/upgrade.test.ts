import { afterEach, describe, expect, it } from 'vitest';
import type { Deps } from '../functions/context.ts';
import { upgradeJob } from '../functions/upgrade/job.ts';
import { apiFor, defaultUpgradeImage, kubernetesRefusal, upgradeBatches } from '../functions/upgrade/plan.ts';
import { enqueueClusterRun } from '../functions/runs/enqueue.ts';
import { upgradeExecutor } from '../runner/jobs/upgrade/executor.ts';
import { bind } from '../runner/jobs/registry.ts';
import { loadKubernetesClient } from '../lib/kube/index.ts';
import { VANILLA_SCHEMATIC } from '../lib/talos/installer.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { finishedRun, createHarness, type Harness } from './support/harness.ts';
import type { Json } from './support/api-caller.ts';
import { clusters, machines } from '../db/schema/index.ts';
import { eq } from 'drizzle-orm';
import { fleet, startUpgradeCluster, type MachineSpec, type UpgradeCluster } from './support/upgrade-cluster.ts';

const FROM = 'v1.13.2';
const TO = 'v1.13.9';
/** What the upgrade marks its own cordon with; operators may see and rely on the name. */
const CORDON_ANNOTATION = 'rezuscloud.io/cordoned-for-upgrade';
const IMAGE = `factory.talos.dev/installer/${VANILLA_SCHEMATIC}:${TO}`;
/** Metal machines upgrade to the metal platform's installer, not the generic one. */
const METAL_IMAGE = `factory.talos.dev/metal-installer/${VANILLA_SCHEMATIC}:${TO}`;
const UPGRADE_CALLS = ['Upgrade', 'ImageService/Pull', 'LifecycleService/Upgrade', 'Reboot'];

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

async function setup(specs: MachineSpec[], talosVersion = FROM, kubernetesVersion?: string): Promise<{ h: Harness; c: UpgradeCluster }> {
  h = await createHarness({
    patchDeps: (d: Deps) => {
      d.settings.upgrade = { pollMs: 20, callDeadlineMs: 2_000, rebootTimeoutMs: 10_000, gateTimeoutMs: 800, kubeDeadlineMs: 3_000 };
    },
  });
  cluster = await startUpgradeCluster(h, { talosVersion, machines: specs, ...(kubernetesVersion ? { kubernetesVersion } : {}) });
  // Loading the Kubernetes client stalls the event loop for
  // seconds on a busy machine: load it before the clock of the first gate starts.
  await loadKubernetesClient();
  worker = startWorker(h);
  return { h, c: cluster };
}

function startWorker(hh: Harness): Worker {
  // A cancel through the API reaches the worker at once (the run bus), so the lease can be long
  // enough that a loaded machine never loses it mid-test.
  const w = createWorker({ deps: hh.deps, executors: Object.fromEntries([bind(upgradeJob, upgradeExecutor)]), workerId: 'test', leaseMs: 5_000, concurrency: 1, pollMs: 20 });
  w.start();
  return w;
}

/** The body of the last PATCH of Kubernetes node `name`, if any. */
function lastNodePatch(c: UpgradeCluster, name: string): Json | undefined {
  return c.kube.writes.filter((w) => w.method === 'PATCH' && w.path === `/api/v1/nodes/${name}`).at(-1)?.body as Json | undefined;
}

async function startUpgrade(hh: Harness, c: UpgradeCluster, body: Record<string, unknown> = {}): Promise<string> {
  const res = await hh.call('POST', `/v1/clusters/${c.clusterId}/upgrade`, { body: { talosVersion: TO, ...body } });
  expect(res.status).toBe(202);
  expect(res.body.run.kind).toBe('upgrade');
  return res.body.run.id;
}


async function events(hh: Harness, runId: string): Promise<Json[]> {
  return (await hh.call('GET', `/v1/runs/${runId}/events`)).body.events;
}

const touched = (c: UpgradeCluster, name: string) => c.sim(name).calls.filter((x) => UPGRADE_CALLS.includes(x.method));

/** seq of the first event of `type` for `node`. */
function seqOf(evs: Json[], type: string, node: string): number {
  const e = evs.find((x) => x.type === type && x.data?.node === node);
  if (!e) throw new Error(`no ${type} event for ${node}`);
  return e.seq;
}

async function clusterVersion(hh: Harness, c: UpgradeCluster): Promise<string> {
  return (await hh.call('GET', `/v1/clusters/${c.clusterId}`)).body.talosVersion;
}

async function machineVersions(hh: Harness, c: UpgradeCluster): Promise<Record<string, string | null>> {
  const list = (await hh.call('GET', `/v1/clusters/${c.clusterId}/machines`)).body.machines as Json[];
  return Object.fromEntries(list.map((m) => [m.name, m.talosVersion]));
}

describe('rolling Talos upgrade', () => {
  it('upgrades control planes one at a time, then workers in batches, through the v1.13 API', async () => {
    const { h, c } = await setup(fleet(3, 3));
    const runId = await startUpgrade(h, c, { batchSize: 2 });
    const run = await finishedRun(h, runId);
    expect(run.error).toBeNull();
    expect(run.state).toBe('succeeded');
    expect(run.params.image).toBe(IMAGE);
    expect(Object.values(run.params.images as Record<string, string>)).toEqual(Array(6).fill(METAL_IMAGE));

    for (const name of ['cp1', 'cp2', 'cp3', 'w1', 'w2', 'w3']) {
      const sim = c.sim(name);
      expect(sim.version).toBe(TO);
      expect(sim.pulledImages).toEqual([METAL_IMAGE]);
      expect(sim.upgrades).toEqual([{ api: 'lifecycle', image: METAL_IMAGE, stage: false }]);
      expect(sim.reboots).toEqual(['reboot']);
    }

    const evs = await events(h, runId);
    const start = (n: string) => seqOf(evs, 'upgrade.node.start', n);
    const done = (n: string) => seqOf(evs, 'upgrade.node.done', n);
    // Control planes strictly one after another.
    expect(done('cp1')).toBeLessThan(start('cp2'));
    expect(done('cp2')).toBeLessThan(start('cp3'));
    expect(done('cp3')).toBeLessThan(Math.min(start('w1'), start('w2')));
    // w1 and w2 form one batch: both start before either is done; w3 waits for both.
    expect(Math.max(start('w1'), start('w2'))).toBeLessThan(Math.min(done('w1'), done('w2')));
    expect(Math.max(done('w1'), done('w2'))).toBeLessThan(start('w3'));
    // Each node goes through every phase in order.
    for (const n of ['cp1', 'w3']) {
      const phases = evs.filter((e) => e.data?.node === n).map((e) => e.type);
      const order = ['upgrade.node.start', 'upgrade.pull', 'upgrade.install', 'upgrade.drain', 'upgrade.reboot', 'upgrade.wait', 'upgrade.uncordon', 'upgrade.gate', 'upgrade.node.done'];
      expect([...new Set(phases)]).toEqual(order);
      expect(evs.filter((e) => e.data?.node === n).every((e) => typeof e.data.elapsedMs === 'number')).toBe(true);
    }
    // The install stream's progress shows up in the log.
    expect(evs.some((e) => e.type === 'upgrade.install' && e.data?.node === 'cp2' && e.data.progress === 'installing Talos to disk')).toBe(true);
    // A health check before every step: three control planes, two worker batches.
    expect(evs.filter((e) => e.type === 'upgrade.precheck').map((e) => e.data.nodes)).toEqual([['cp1'], ['cp2'], ['cp3'], ['w1', 'w2'], ['w3']]);

    expect(await clusterVersion(h, c)).toBe(TO);
    expect(Object.values(await machineVersions(h, c))).toEqual(Array(6).fill(TO));
    expect(run.result.upgraded.map((u: Json) => u.name)).toEqual(['cp1', 'cp2', 'cp3', 'w1', 'w2', 'w3']);
  });

  it('takes an etcd snapshot of a bootstrapped cluster before the first node is touched; a run with nothing to do takes none', async () => {
    const { h, c } = await setup(fleet(1, 1));
    await h.deps.db.update(clusters).set({ bootstrappedAt: Date.now() }).where(eq(clusters.id, c.clusterId));
    const runId = await startUpgrade(h, c);
    expect((await finishedRun(h, runId)).state).toBe('succeeded');
    const snapshots = (await h.call('GET', `/v1/clusters/${c.clusterId}/etcd-snapshots`)).body.snapshots as Json[];
    expect(snapshots).toMatchObject([{ trigger: 'upgrade', runId, machine: 'cp1' }]);
    const evs = await events(h, runId);
    expect(evs.find((e) => e.type === 'etcd.snapshot.done').seq).toBeLessThan(seqOf(evs, 'upgrade.node.start', 'cp1'));

    const again = await finishedRun(h, await startUpgrade(h, c));
    expect(again.result.skipped).toEqual(['cp1', 'w1']);
    expect((await h.call('GET', `/v1/clusters/${c.clusterId}/etcd-snapshots`)).body.snapshots).toHaveLength(1);
  });

  it('a control plane that comes back unhealthy stops the run; no later node is touched', async () => {
    const { h, c } = await setup(fleet(3, 2));
    const cp2 = c.sim('cp2');
    const broken = cp2.waitForPhase('down', 20_000).then(() => cp2.setServiceState('etcd', { state: 'Running', healthy: false, lastMessage: 'etcd member not responding' }));
    const runId = await startUpgrade(h, c);
    const run = await finishedRun(h, runId);
    await broken;
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/cp2: failed the health gate/);
    expect(run.error).toMatch(/service etcd unhealthy: etcd member not responding/);
    expect(touched(c, 'cp1').length).toBeGreaterThan(0);
    expect(touched(c, 'cp2').length).toBeGreaterThan(0);
    for (const n of ['cp3', 'w1', 'w2']) expect(touched(c, n)).toEqual([]);
    expect(c.sim('cp3').version).toBe(FROM);
    // cp2 did come back on the new version, and that is recorded; the cluster's version is not.
    expect(await machineVersions(h, c)).toMatchObject({ cp1: TO, cp2: TO, cp3: FROM });
    expect(await clusterVersion(h, c)).toBe(FROM);
    const evs = await events(h, runId);
    expect(evs.some((e) => e.type === 'upgrade.node.done' && e.data?.node === 'cp2')).toBe(false);
  });

  it('refuses to start while etcd is degraded: no node gets an upgrade call', async () => {
    const { h, c } = await setup(fleet(3, 1));
    c.sim('cp3').setEtcdErrors(['etcdserver: request timed out']);
    const run = await finishedRun(h, await startUpgrade(h, c));
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^refusing to upgrade: cluster not healthy before cp1/);
    expect(run.error).toMatch(/etcd has 2\/3 healthy members/);
    for (const n of ['cp1', 'cp2', 'cp3', 'w1']) expect(touched(c, n)).toEqual([]);
    expect(await clusterVersion(h, c)).toBe(FROM);
  });

  it('refuses a batch while a Kubernetes node is NotReady', async () => {
    const { h, c } = await setup(fleet(1, 2));
    c.kube.setNode('w2', { ready: false });
    const run = await finishedRun(h, await startUpgrade(h, c));
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/node w2 NotReady/);
    for (const n of ['cp1', 'w1', 'w2']) expect(touched(c, n)).toEqual([]);
  });

  it('skips nodes already on the target version', async () => {
    const { h, c } = await setup([...fleet(1, 0), { name: 'w1', role: 'worker', version: TO }, { name: 'w2', role: 'worker' }]);
    const runId = await startUpgrade(h, c);
    const run = await finishedRun(h, runId);
    expect(run.state).toBe('succeeded');
    expect(touched(c, 'w1')).toEqual([]);
    expect(c.sim('cp1').upgrades).toHaveLength(1);
    expect(c.sim('w2').upgrades).toHaveLength(1);
    expect(run.result.skipped).toEqual(['w1']);
    const evs = await events(h, runId);
    expect(evs.filter((e) => e.type === 'upgrade.node.skip').map((e) => e.data.node)).toEqual(['w1']);
    expect(await clusterVersion(h, c)).toBe(TO);
  });

  it('cancel stops after the node in flight; the rest stay untouched', async () => {
    const { h, c } = await setup([...fleet(1, 0), { name: 'w1', role: 'worker', rebootMs: 1_000 }, { name: 'w2', role: 'worker' }, { name: 'w3', role: 'worker' }]);
    const runId = await startUpgrade(h, c);
    for (let i = 0; ; i++) {
      if ((await events(h, runId)).some((e) => e.type === 'upgrade.node.start' && e.data?.node === 'w1')) break;
      if (i > 800) throw new Error('w1 never started');
      await new Promise((r) => setTimeout(r, 10));
    }
    expect((await h.call('POST', `/v1/runs/${runId}/cancel`)).status).toBe(202);
    const run = await finishedRun(h, runId);
    expect(run.state).toBe('canceled');
    // w1 was in flight: it finished completely, gate included.
    expect(c.sim('w1').version).toBe(TO);
    const evs = await events(h, runId);
    expect(evs.some((e) => e.type === 'upgrade.node.done' && e.data?.node === 'w1')).toBe(true);
    expect(touched(c, 'w2')).toEqual([]);
    expect(touched(c, 'w3')).toEqual([]);
    expect(run.result.untouched).toEqual(['w2', 'w3']);
    expect(await clusterVersion(h, c)).toBe(FROM);
  });

  it('a new run resumes a failed one, skipping the nodes already upgraded', async () => {
    const { h, c } = await setup(fleet(1, 3));
    const w1 = c.sim('w1');
    const notReady = w1.waitForPhase('down', 20_000).then(() => c.kube.setNode('w1', { ready: false }));
    const first = await finishedRun(h, await startUpgrade(h, c));
    await notReady;
    expect(first.state).toBe('failed');
    expect(first.error).toMatch(/w1: failed the health gate.*Kubernetes node NotReady/);
    expect(touched(c, 'w2')).toEqual([]);
    expect(await clusterVersion(h, c)).toBe(FROM);

    c.kube.setNode('w1', { ready: true });
    const second = await finishedRun(h, await startUpgrade(h, c));
    expect(second.state).toBe('succeeded');
    expect(second.result.skipped).toEqual(['cp1', 'w1']);
    expect(second.result.upgraded.map((u: Json) => u.name)).toEqual(['w2', 'w3']);
    for (const n of ['cp1', 'w1', 'w2', 'w3']) expect(c.sim(n).upgrades).toHaveLength(1);
    expect(await clusterVersion(h, c)).toBe(TO);
  });

  it('a run stopped while a drained node reboots leaves it to the next run, which uncordons and gates it before recording the version', async () => {
    const { h, c } = await setup([...fleet(1, 0), { name: 'w1', role: 'worker', rebootMs: 1_000 }]);
    const w1 = c.sim('w1');
    const first = await startUpgrade(h, c);
    await w1.waitForPhase('down', 20_000);
    await worker!.stop(0);
    expect((await finishedRun(h, first)).state).toBe('interrupted');
    await w1.waitForPhase('configured', 20_000);
    // Back on the new version, but still cordoned with this product's mark.
    expect(w1.version).toBe(TO);
    expect(lastNodePatch(c, 'w1')).toMatchObject({ spec: { unschedulable: true } });
    expect(c.kube.nodeAnnotations('w1')).toEqual({ [CORDON_ANNOTATION]: 'true' });

    worker = startWorker(h);
    // Its gate must hold it back while it is NotReady: skipped is not the same as done.
    c.kube.setNode('w1', { ready: false });
    const second = await finishedRun(h, await startUpgrade(h, c));
    expect(second.state).toBe('failed');
    expect(second.error).toMatch(/^w1: failed the health gate.*Kubernetes node NotReady/);
    expect(lastNodePatch(c, 'w1')).toEqual({ metadata: { annotations: { [CORDON_ANNOTATION]: null } }, spec: { unschedulable: null } });
    expect(c.kube.nodeAnnotations('w1')).toEqual({});
    expect(await clusterVersion(h, c)).toBe(FROM);

    c.kube.setNode('w1', { ready: true });
    const thirdId = await startUpgrade(h, c);
    const third = await finishedRun(h, thirdId);
    expect(third.state).toBe('succeeded');
    expect(third.result.skipped).toEqual(['cp1', 'w1']);
    const evs = await events(h, thirdId);
    // Gated before it counts as skipped: the skip is the node's last word, which the run view shows.
    expect(seqOf(evs, 'upgrade.gate', 'w1')).toBeLessThan(seqOf(evs, 'upgrade.node.skip', 'w1'));
    expect(evs.some((e) => e.type === 'upgrade.gate' && e.data?.node === 'w1' && /healthy$/.test(e.message))).toBe(true);
    expect(w1.upgrades).toHaveLength(1);
    expect(await clusterVersion(h, c)).toBe(TO);
  });

  it('a node an operator cordoned by hand stays cordoned when already on the target, and holds back the version', async () => {
    const { h, c } = await setup([
      { name: 'cp1', role: 'controlplane', version: TO },
      { name: 'w1', role: 'worker', version: TO },
    ]);
    c.kube.setNode('w1', { unschedulable: true });
    const run = await finishedRun(h, await startUpgrade(h, c));
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^w1: failed the health gate.*Kubernetes node cordoned/);
    expect(lastNodePatch(c, 'w1')).toBeUndefined();
    expect(await clusterVersion(h, c)).toBe(FROM);
  });

  it('records the cluster version only once a final health check of the whole cluster passes', async () => {
    const { h, c } = await setup(fleet(1, 1, { version: TO }));
    // Each node passes its own gate; only the cluster-wide view sees this.
    c.kube.setReadyz(false, ['etcd']);
    const run = await finishedRun(h, await startUpgrade(h, c));
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^every node runs v1\.13\.9, but the cluster failed its final health check.*readyz failing: etcd/);
    expect(await clusterVersion(h, c)).toBe(FROM);

    c.kube.setReadyz(true);
    expect((await finishedRun(h, await startUpgrade(h, c))).state).toBe('succeeded');
    expect(await clusterVersion(h, c)).toBe(TO);
  });

  it('refuses a node the target would take back a minor version, unless forced, before touching it', async () => {
    const OLD = 'v1.12.11';
    // An upgrade to v1.13.9 that stopped after cp1: the cluster still says v1.12.11.
    const { h, c } = await setup([{ name: 'cp1', role: 'controlplane', version: TO }, { name: 'w1', role: 'worker' }], OLD, '1.35.0');
    const run = await finishedRun(h, await startUpgrade(h, c, { talosVersion: OLD }));
    expect(run.state).toBe('failed');
    expect(run.error).toBe('refusing to upgrade: v1.12.11 is a minor-version downgrade for cp1 runs v1.13.9; pass force to do it anyway');
    expect(touched(c, 'cp1')).toEqual([]);
    expect(c.sim('cp1').version).toBe(TO);
    // Now that the machine's version is recorded, the route refuses too.
    const refused = await h.call('POST', `/v1/clusters/${c.clusterId}/upgrade`, { body: { talosVersion: OLD } });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('downgrade_refused');
  });

  it('refuses to reboot the control planes of a two-member etcd unless forced', async () => {
    const { h, c } = await setup(fleet(2, 1));
    const run = await finishedRun(h, await startUpgrade(h, c));
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^refusing to upgrade: etcd has 2 voting members, so its quorum needs both: .*pass force/);
    for (const n of ['cp1', 'cp2', 'w1']) expect(touched(c, n)).toEqual([]);

    const forcedId = await startUpgrade(h, c, { force: true });
    expect((await finishedRun(h, forcedId)).state).toBe('succeeded');
    const evs = await events(h, forcedId);
    expect(evs.some((e) => e.type === 'upgrade.precheck' && e.level === 'warn' && /^force: upgrading anyway; etcd has 2 voting members/.test(e.message))).toBe(true);
  });

  it('a v1.12 node takes the legacy MachineService/Upgrade path', async () => {
    const { h, c } = await setup([...fleet(1, 0), { name: 'w1', role: 'worker', version: 'v1.12.11' }]);
    const runId = await startUpgrade(h, c);
    const run = await finishedRun(h, runId);
    expect(run.state).toBe('succeeded');
    const w1 = c.sim('w1');
    expect(w1.upgrades).toEqual([{ api: 'legacy', image: METAL_IMAGE, stage: false }]);
    // The v1.13 API is not even tried, and the node reboots itself.
    expect(w1.calls.map((x) => x.method)).not.toContain('ImageService/Pull');
    expect(w1.reboots).toEqual(['upgrade']);
    expect(w1.version).toBe(TO);
    expect(c.sim('cp1').upgrades.map((u) => u.api)).toEqual(['lifecycle']);
    expect(run.result.upgraded).toMatchObject([{ name: 'cp1', api: 'lifecycle' }, { name: 'w1', api: 'legacy', from: 'v1.12.11' }]);
  });

  it('a staged legacy upgrade is activated by a reboot RezusCloud asks for', async () => {
    const { h, c } = await setup([{ name: 'cp1', role: 'controlplane', version: 'v1.12.11' }]);
    const run = await finishedRun(h, await startUpgrade(h, c, { stage: true, preserve: true }));
    expect(run.state).toBe('succeeded');
    expect(c.sim('cp1').upgrades).toEqual([{ api: 'legacy', image: METAL_IMAGE, stage: true }]);
    expect(c.sim('cp1').reboots).toEqual(['reboot']);
    expect(c.sim('cp1').version).toBe(TO);
  });

  it('a node that reboots back into its old version fails the run instead of being upgraded again', async () => {
    const { h, c } = await setup(fleet(1, 1));
    const cp1 = c.sim('cp1');
    // Like a node whose new image fails to boot and falls back to the previous one.
    const rollback = cp1.waitForPhase('down', 20_000).then(() => (cp1.pendingVersion = undefined));
    const run = await finishedRun(h, await startUpgrade(h, c));
    await rollback;
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/cp1: rebooted but runs v1\.13\.2, not v1\.13\.9/);
    expect(cp1.upgrades).toHaveLength(1);
    expect(touched(c, 'w1')).toEqual([]);
    expect(await machineVersions(h, c)).toMatchObject({ cp1: FROM });
  });
});

describe('upgrade plan', () => {
  it('re-tags the cluster installer image (dropping a digest), else uses the factory image of the schematic', () => {
    const digest = `@sha256:${'a'.repeat(64)}`;
    expect(defaultUpgradeImage({ schematic: VANILLA_SCHEMATIC, installerImage: `ghcr.io/siderolabs/installer:v1.13.2${digest}` }, TO)).toBe(`ghcr.io/siderolabs/installer:${TO}`);
    expect(defaultUpgradeImage({ schematic: VANILLA_SCHEMATIC, installerImage: 'reg.example:5000/talos/installer' }, TO)).toBe(`reg.example:5000/talos/installer:${TO}`);
    expect(defaultUpgradeImage({ schematic: VANILLA_SCHEMATIC }, TO)).toBe(IMAGE);
  });

  it('refuses a Talos that would not run the Kubernetes in use, counting what an unfinished Kubernetes upgrade moved', () => {
    const plain = [{ kubernetesComponents: null }];
    expect(kubernetesRefusal('v1.14.0', { kubernetesVersion: '1.36.3' }, plain)).toBeUndefined();
    expect(kubernetesRefusal('v1.14.0', { kubernetesVersion: '1.31.4' }, plain)).toBe(
      'Kubernetes 1.31.4 is too old for Talos v1.14.0 (it runs 1.32 to 1.37): after the reboot its nodes would reject their own configs (Talos checks the Kubernetes image tags it runs)',
    );
    // A cluster on 1.36 whose control planes already run 1.37 parts cannot go back to a Talos that stops at 1.36.
    const held = [{ kubernetesComponents: { 'kube-apiserver': '1.37.0' } }, { kubernetesComponents: null }];
    expect(kubernetesRefusal('v1.13.9', { kubernetesVersion: '1.36.3' }, held)).toMatch(/^Kubernetes 1\.37\.0 is too new for Talos v1\.13\.9 \(it runs 1\.31 to 1\.36\)/);
    // A release line the table does not know yet is not refused.
    expect(kubernetesRefusal('v1.99.0', { kubernetesVersion: '1.20.0' }, plain)).toBeUndefined();
  });

  it('picks the API by node version', () => {
    expect(apiFor('v1.12.11')).toBe('legacy');
    expect(apiFor('v1.13.0')).toBe('lifecycle');
    expect(apiFor('v1.14.0-rc.1')).toBe('lifecycle');
    expect(apiFor('v2.0.0')).toBe('lifecycle');
    expect(apiFor('garbage')).toBe('legacy');
  });

  it('orders control planes singly, then workers in batches', () => {
    const ms = [
      { id: '1', name: 'w3', role: 'worker' as const },
      { id: '2', name: 'cp2', role: 'controlplane' as const },
      { id: '3', name: 'w1', role: 'worker' as const },
      { id: '4', name: 'cp1', role: 'controlplane' as const },
      { id: '5', name: 'w2', role: 'worker' as const },
    ];
    expect(upgradeBatches(ms, 2).map((b) => b.machines.map((m) => m.name))).toEqual([['cp1'], ['cp2'], ['w1', 'w2'], ['w3']]);
  });
});

describe('POST /v1/clusters/:id/upgrade validation', () => {
  it('rejects bad input and conflicting runs, changing nothing', async () => {
    h = await createHarness();
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'v' } });
    const cl = await h.call('POST', '/v1/clusters', {
      body: { tenant: t.body.id, name: 'c', talosVersion: FROM, kubernetesVersion: '1.36.3', endpoint: 'https://[2001:db8::1]:6443' },
    });
    const path = `/v1/clusters/${cl.body.id}/upgrade`;
    expect((await h.call('POST', path, { body: { talosVersion: TO } })).status).toBe(409); // no machines
    for (const [name, role] of [['cp1', 'controlplane'], ['w1', 'worker'], ['w2', 'worker']]) {
      await h.call('POST', `/v1/clusters/${cl.body.id}/machines`, { body: { name, role, provider: 'metal', address: '2001:db8::10' } });
    }
    expect((await h.call('POST', path, { body: { talosVersion: 'latest' } })).status).toBe(400);
    expect((await h.call('POST', path, { body: { talosVersion: TO, batchSize: 0 } })).status).toBe(400);
    const tooBig = await h.call('POST', path, { body: { talosVersion: TO, batchSize: 3 } });
    expect(tooBig.status).toBe(400);
    expect(tooBig.body.error.message).toMatch(/between 1 and 2/);
    expect((await h.call('POST', path, { body: { talosVersion: TO, surprise: true } })).status).toBe(400);
    expect((await h.call('POST', path, { body: { talosVersion: TO, image: 'not an image' } })).status).toBe(400);
    const down = await h.call('POST', path, { body: { talosVersion: 'v1.12.11' } });
    expect(down.status).toBe(409);
    expect(down.body.error.code).toBe('downgrade_refused');
    // force takes the downgrade, but not a Talos that would reject the cluster's Kubernetes.
    const forced = await h.call('POST', path, { body: { talosVersion: 'v1.12.11', force: true } });
    expect(forced.status).toBe(409);
    expect(forced.body.error.code).toBe('kubernetes_unsupported');
    expect(forced.body.error.message).toMatch(/^Kubernetes 1\.36\.3 is too new for Talos v1\.12\.11 \(it runs 1\.30 to 1\.35\): after the reboot/);
    expect((await h.call('GET', `/v1/runs?cluster=${cl.body.id}`)).body.runs).toEqual([]);


    const ok = await h.call('POST', path, { body: { talosVersion: '1.13.9', batchSize: 2 } });
    expect(ok.status).toBe(202);
    expect(ok.body.run.params).toMatchObject({ talosVersion: TO, image: IMAGE, batchSize: 2, stage: false, force: false, preserve: false, drain: true });
    expect(Object.values(ok.body.run.params.images as Record<string, string>)).toEqual(Array(3).fill(METAL_IMAGE));
    const again = await h.call('POST', path, { body: { talosVersion: TO } });
    expect(again.status).toBe(409);
    expect(again.body.error.details.activeRun).toBe(ok.body.run.id);

    const ro = await h.call('POST', `/v1/tenants/${t.body.id}/tokens`, { body: { name: 'ro', scopes: ['read'] } });
    expect((await h.call('POST', path, { body: { talosVersion: TO }, token: ro.body.token })).status).toBe(403);
  });

  it('refuses a minor downgrade from what machines already run while the cluster still records the old version', async () => {
    h = await createHarness();
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'd' } });
    const cl = await h.call('POST', '/v1/clusters', { body: { tenant: t.body.id, name: 'half', talosVersion: 'v1.12.11', kubernetesVersion: '1.35.0', endpoint: 'https://127.0.0.1:1' } });
    const cp1 = await h.call('POST', `/v1/clusters/${cl.body.id}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'metal', address: '127.0.0.1:1' } });
    await h.call('POST', `/v1/clusters/${cl.body.id}/machines`, { body: { name: 'w1', role: 'worker', provider: 'metal', address: '127.0.0.1:1' } });
    // A v1.13.9 upgrade that stopped after cp1.
    await h.deps.db.update(machines).set({ talosVersion: TO }).where(eq(machines.id, cp1.body.id));
    const down = await h.call('POST', `/v1/clusters/${cl.body.id}/upgrade`, { body: { talosVersion: 'v1.12.11' } });
    expect(down.status).toBe(409);
    expect(down.body.error.code).toBe('downgrade_refused');
    expect(down.body.error.message).toBe('v1.12.11 is a minor-version downgrade for machines already upgraded: cp1 runs v1.13.9; pass force to do it anyway');
    expect((await h.call('GET', `/v1/runs?cluster=${cl.body.id}`)).body.runs).toEqual([]);
    expect((await h.call('POST', `/v1/clusters/${cl.body.id}/upgrade`, { body: { talosVersion: 'v1.12.11', force: true } })).status).toBe(202);
  });

  it('refuses a Talos that would not run the cluster\'s Kubernetes, up front and again in the run', async () => {
    h = await createHarness();
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'k' } });
    const old = await h.call('POST', '/v1/clusters', { body: { tenant: t.body.id, name: 'old', talosVersion: FROM, kubernetesVersion: '1.31.4', endpoint: 'https://127.0.0.1:1' } });
    // Port 1 on loopback refuses: a run that got past its checks would fail on its first dial.
    await h.call('POST', `/v1/clusters/${old.body.id}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'metal', address: '127.0.0.1:1' } });
    const tooOld = await h.call('POST', `/v1/clusters/${old.body.id}/upgrade`, { body: { talosVersion: 'v1.14.0' } });
    expect(tooOld.status).toBe(409);
    expect(tooOld.body.error.code).toBe('kubernetes_unsupported');
    expect(tooOld.body.error.message).toMatch(/^Kubernetes 1\.31\.4 is too old for Talos v1\.14\.0 .*; upgrade Kubernetes first, or choose a Talos that runs it$/);
    expect((await h.call('GET', `/v1/runs?cluster=${old.body.id}`)).body.runs).toEqual([]);

    // A run queued before (the route let it through then) refuses by itself, touching nothing.
    worker = createWorker({ deps: h.deps, executors: Object.fromEntries([bind(upgradeJob, upgradeExecutor)]), workerId: 'test', leaseMs: 5_000, concurrency: 1, pollMs: 20 });
    worker.start();
    const queued = await enqueueClusterRun(h.deps, { id: old.body.id, tenantId: t.body.id }, upgradeJob, { talosVersion: 'v1.14.0', image: IMAGE, batchSize: 1, stage: false, force: true, preserve: false }, 'test');
    const refused = await finishedRun(h, queued.id);
    expect(refused.state).toBe('failed');
    expect(refused.error).toMatch(/^refusing to upgrade: Kubernetes 1\.31\.4 is too old for Talos v1\.14\.0 \(it runs 1\.32 to 1\.37\)/);
  });
});
