import { afterEach, describe, expect, it } from 'vitest';
import type { Deps } from '../functions/context.ts';
import { upgradeKubernetesJob } from '../functions/upgrade/kubernetes-job.ts';
import { upgradeKubernetesExecutor } from '../runner/jobs/upgrade-kubernetes/executor.ts';
import { pushConfigJob } from '../functions/push-config/job.ts';
import { pushConfigExecutor } from '../runner/jobs/push-config/executor.ts';
import { clusters, machines } from '../db/schema/index.ts';
import { eq } from 'drizzle-orm';
import { bind } from '../runner/jobs/registry.ts';
import { loadKubernetesClient } from '../lib/kube/index.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { linkKubeToTalos, type KubeTalosLink } from './sim/kube/talos-link.ts';
import { parseSimConfig } from './sim/talos/sim-config.ts';
import { alertOf, FormClient } from './support/dashboard-client.ts';
import { finishedRun, createHarness, type Harness } from './support/harness.ts';
import type { Json } from './support/api-caller.ts';
import { fleet, startUpgradeCluster, type MachineSpec, type UpgradeCluster } from './support/upgrade-cluster.ts';

const TALOS = 'v1.14.0';
const FROM = '1.36.3';
const TO = '1.37.0';
const img = (name: string, v: string): string => `registry.k8s.io/${name}:v${v}`;
const KUBELET_TO = `ghcr.io/siderolabs/kubelet:v${TO}`;

let h: Harness | undefined;
let worker: Worker | undefined;
let cluster: UpgradeCluster | undefined;
let link: KubeTalosLink | undefined;

afterEach(async () => {
  link?.stop();
  await worker?.stop(0);
  await cluster?.stop();
  await h?.close();
  link = undefined;
  worker = undefined;
  cluster = undefined;
  h = undefined;
});

async function setup(
  machines: MachineSpec[],
  opts: { restartMs?: number; gateTimeoutMs?: number; startWorker?: boolean; talosVersion?: string; kubernetesVersion?: string } = {},
): Promise<{ h: Harness; c: UpgradeCluster; link: KubeTalosLink }> {
  h = await createHarness({
    patchDeps: (d: Deps) => {
      d.settings.upgrade = { pollMs: 20, callDeadlineMs: 2_000, gateTimeoutMs: opts.gateTimeoutMs ?? 800, kubeDeadlineMs: 2_000 };
    },
  });
  cluster = await startUpgradeCluster(h, { talosVersion: opts.talosVersion ?? TALOS, machines, ...(opts.kubernetesVersion ? { kubernetesVersion: opts.kubernetesVersion } : {}) });
  link = linkKubeToTalos(cluster.kube, cluster.sims, { restartMs: opts.restartMs ?? 20 });
  // Loading the Kubernetes client stalls the event loop for
  // seconds on a busy machine: load it before the clock of the first gate starts.
  await loadKubernetesClient();
  // A cancel through the API reaches the worker at once (the run bus), so the lease can be long
  // enough that a loaded machine never loses it mid-test.
  worker = createWorker({ deps: h.deps, executors: Object.fromEntries([bind(upgradeKubernetesJob, upgradeKubernetesExecutor), bind(pushConfigJob, pushConfigExecutor)]), workerId: 'test', leaseMs: 5_000, concurrency: 1, pollMs: 20 });
  if (opts.startWorker !== false) worker.start();
  return { h, c: cluster, link };
}

async function start(hh: Harness, c: UpgradeCluster, version = TO, more: Json = {}): Promise<string> {
  const res = await hh.call('POST', `/v1/clusters/${c.clusterId}/upgrade-kubernetes`, { body: { version, ...more } });
  expect(res.status).toBe(202);
  expect(res.body.run.kind).toBe('upgrade-kubernetes');
  return res.body.run.id;
}


const events = async (hh: Harness, runId: string): Promise<Json[]> => (await hh.call('GET', `/v1/runs/${runId}/events`)).body.events;
const k8sVersion = async (hh: Harness, c: UpgradeCluster): Promise<string> => (await hh.call('GET', `/v1/clusters/${c.clusterId}`)).body.kubernetesVersion;

/** The component images of every config `node` was sent, in order. */
function sentImages(c: UpgradeCluster, node: string): Json[] {
  return c.sim(node).receivedConfigs.map((r) => ({ mode: r.mode, ...parseSimConfig(r.data).v1alpha1!.images }));
}

/** A run refused before it began: no node was sent a config or asked to pull, the cluster's version is as it was. */
async function expectUntouched(hh: Harness, c: UpgradeCluster, nodes: string[]): Promise<void> {
  for (const n of nodes) {
    expect(c.sim(n).receivedConfigs).toEqual([]);
    expect(c.sim(n).calls.filter((x) => x.method === 'ImageService/Pull')).toEqual([]);
  }
  expect(await k8sVersion(hh, c)).toBe(FROM);
}

/** Each machine's kubernetesComponents, by name. */
async function heldComponents(hh: Harness, c: UpgradeCluster): Promise<Record<string, Json>> {
  const list = (await hh.call('GET', `/v1/clusters/${c.clusterId}/machines`)).body.machines as Json[];
  return Object.fromEntries(list.map((m) => [m.name, m.kubernetesComponents]));
}

/** A push of one machine over mTLS: the test cluster's nodes run their configs, so they count as configured. */
async function pushConfigured(hh: Harness, c: UpgradeCluster, node: string): Promise<Json> {
  const id = c.machineIds.get(node)!;
  await hh.deps.db.update(machines).set({ state: 'configured' }).where(eq(machines.id, id));
  const res = await hh.call('POST', `/v1/clusters/${c.clusterId}/machines/${id}/push-config`, { body: {} });
  expect(res.status).toBe(202);
  return finishedRun(hh, res.body.run.id);
}

const STEPS_2CP_1W = [
  'kube-apiserver on cp1', 'kube-apiserver on cp2',
  'kube-controller-manager on cp1', 'kube-controller-manager on cp2',
  'kube-scheduler on cp1', 'kube-scheduler on cp2',
  'kube-proxy',
  'kubelet on cp1', 'kubelet on cp2', 'kubelet on w1',
];

describe('Kubernetes upgrade', () => {
  it('pre-pulls, then moves each static pod across the control planes, kube-proxy, then each kubelet, without reboots', async () => {
    const { h, c } = await setup(fleet(2, 1));
    const runId = await start(h, c);
    const run = await finishedRun(h, runId);
    expect(run.error).toBeNull();
    expect(run.state).toBe('succeeded');
    // The last step syncs the bootstrap manifests the control planes now render (runner/jobs/manifests).
    expect(run.result.upgraded).toEqual([...STEPS_2CP_1W, 'bootstrap manifests']);
    expect(run.result.manifests.created).toBeGreaterThan(0);
    expect(run.result.manifests.deleted).toBe(0);
    expect(await k8sVersion(h, c)).toBe(TO);

    const evs = await events(h, runId);
    const starts = evs.filter((e) => e.type === 'k8s.step.start');
    expect(starts.map((e) => e.data.step)).toEqual([...STEPS_2CP_1W, 'bootstrap manifests']);
    expect(evs.find((e) => e.type === 'manifests.done').seq).toBeLessThan(evs.find((e) => e.type === 'k8s.done').seq);
    // Strictly one step after another: each is done (running and Ready) before the next starts.
    for (const s of starts.slice(1)) {
      const prev = evs.filter((e) => e.type === 'k8s.step.done' && e.seq < s.seq).at(-1);
      expect(prev).toBeDefined();
      expect(evs.filter((e) => e.type === 'k8s.step.start' && e.seq > prev.seq && e.seq < s.seq)).toEqual([]);
    }
    // Every image is pulled before the first config goes out.
    const lastPull = Math.max(...evs.filter((e) => e.type === 'k8s.pull').map((e) => e.seq));
    expect(lastPull).toBeLessThan(evs.find((e) => e.type === 'k8s.apply').seq);
    for (const cp of ['cp1', 'cp2']) {
      expect(c.sim(cp).pulledCriImages.sort()).toEqual([img('kube-apiserver', TO), img('kube-controller-manager', TO), img('kube-proxy', TO), img('kube-scheduler', TO)].sort());
      expect(c.sim(cp).pulledImages).toEqual([KUBELET_TO]);
    }
    expect(c.sim('w1').pulledCriImages).toEqual([img('kube-proxy', TO)]);
    expect(c.sim('w1').pulledImages).toEqual([KUBELET_TO]);

    // cp1 gets one no-reboot config per step it takes part in, each moving one more component.
    const old = { apiServer: img('kube-apiserver', FROM), controllerManager: img('kube-controller-manager', FROM), scheduler: img('kube-scheduler', FROM), proxy: img('kube-proxy', FROM), kubelet: `ghcr.io/siderolabs/kubelet:v${FROM}` };
    const apiServer = { ...old, mode: 'NO_REBOOT', apiServer: img('kube-apiserver', TO) };
    const cm = { ...apiServer, controllerManager: img('kube-controller-manager', TO) };
    const sched = { ...cm, scheduler: img('kube-scheduler', TO) };
    const proxy = { ...sched, proxy: img('kube-proxy', TO) };
    const kubelet = { ...proxy, kubelet: KUBELET_TO };
    expect(sentImages(c, 'cp1')).toEqual([apiServer, cm, sched, proxy, kubelet]);
    expect(sentImages(c, 'w1')).toEqual([{ mode: 'NO_REBOOT', kubelet: KUBELET_TO }]);
    for (const n of ['cp1', 'cp2', 'w1']) expect(c.sim(n).reboots).toEqual([]);

    expect(c.kube.daemonSet('kube-system', 'kube-proxy')?.image).toBe(img('kube-proxy', TO));
    // The sync applied the DaemonSet as cp1 renders it: the same new image, now in Talos's inventory.
    expect((c.kube.object('apps/v1', 'DaemonSet', 'kube-system', 'kube-proxy') as Json).metadata.annotations['config.k8s.io/owning-inventory']).toBe('talos-bootstrap-manifests-inventory');
    expect(c.kube.pods('cp2').find((p) => p.name === 'kube-scheduler-cp2')).toMatchObject({ image: img('kube-scheduler', TO), ready: true });
    // A later push of the cluster's config renders the new version too.
    const cfg = await h.call('GET', `/v1/clusters/${c.clusterId}/machines/${c.machineIds.get('cp1')}/config`);
    expect(cfg.body).toContain(img('kube-apiserver', TO));
  });

  it("a step's wait reads again no sooner than a throttled read's Retry-After asks", async () => {
    const { h, c } = await setup(fleet(1, 0), { gateTimeoutMs: 10_000 });
    // Once the first step's config is on the node, API Priority and Fairness turns three reads away.
    const off = c.sim('cp1').onConfig(() => {
      off();
      c.kube.throttle(3, 1);
    });
    const run = await finishedRun(h, await start(h, c));
    expect(run.error).toBeNull();
    expect(run.state).toBe('succeeded');
    expect(c.kube.throttled).toHaveLength(3);
    // At the 20 ms poll the three would come within a tick of each other; each waited the second asked for.
    expect(c.kube.throttled[1]! - c.kube.throttled[0]!).toBeGreaterThanOrEqual(950);
    expect(c.kube.throttled[2]! - c.kube.throttled[1]!).toBeGreaterThanOrEqual(950);
  });

  it('a component that never becomes ready stops the run naming it; a new run resumes after the steps already done', async () => {
    const { h, c, link } = await setup(fleet(2, 1));
    link.stall('cp2', 'kube-controller-manager');
    const first = await finishedRun(h, await start(h, c));
    expect(first.state).toBe('failed');
    expect(first.error).toMatch(/^cp2: kube-controller-manager did not become ready on 1\.37\.0 within 1s: pod kube-controller-manager-cp2 runs .*kube-controller-manager:v1\.37\.0 but is not Ready/);
    expect(await k8sVersion(h, c)).toBe(FROM);
    // Nothing after the failed step was touched.
    expect(sentImages(c, 'cp1').map((x) => x.scheduler)).toEqual([img('kube-scheduler', FROM), img('kube-scheduler', FROM)]);
    expect(c.sim('cp2').receivedConfigs).toHaveLength(2);
    expect(c.sim('w1').receivedConfigs).toHaveLength(0);
    expect(c.kube.daemonSet('kube-system', 'kube-proxy')?.image).toBe(img('kube-proxy', FROM));

    // What moved is on record, and a push in between (a patch changed, say) keeps it where it is
    // instead of rendering the cluster's recorded version for the whole node.
    const moved = { 'kube-apiserver': TO, 'kube-controller-manager': TO };
    expect(await heldComponents(h, c)).toEqual({ cp1: moved, cp2: moved, w1: null });
    const pushed = await pushConfigured(h, c, 'cp1');
    expect(pushed.state).toBe('succeeded');
    expect(sentImages(c, 'cp1').at(-1)).toEqual({
      mode: 'AUTO',
      apiServer: img('kube-apiserver', TO),
      controllerManager: img('kube-controller-manager', TO),
      scheduler: img('kube-scheduler', FROM),
      proxy: img('kube-proxy', FROM),
      kubelet: `ghcr.io/siderolabs/kubelet:v${FROM}`,
    });
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    expect((await b.get(`/clusters/${c.clusterId}/machines/${c.machineIds.get('cp1')}`)).text).toContain(`kube-apiserver ${TO}, kube-controller-manager ${TO} (an unfinished upgrade)`);
    const clusterPage = (await b.get(`/clusters/${c.clusterId}`)).text;
    expect(clusterPage).toMatch(new RegExp(`An upgrade to ${TO.replaceAll('.', '\\.')} stopped part-way: cp1, cp2 already run`));
    expect(clusterPage).toContain(`value="${TO}"`);

    link.unstall('cp2', 'kube-controller-manager');
    const second = await finishedRun(h, await start(h, c));
    expect(second.state).toBe('succeeded');
    expect(second.result.skipped).toEqual(['kube-apiserver on cp1', 'kube-apiserver on cp2', 'kube-controller-manager on cp1', 'kube-controller-manager on cp2']);
    expect(second.result.upgraded).toEqual([...STEPS_2CP_1W.slice(4), 'bootstrap manifests']);
    // Skipped steps were not pushed again (cp1: 2 configs and the push before, 3 more now), and nothing was pulled for them.
    expect(c.sim('cp1').receivedConfigs).toHaveLength(6);
    expect(c.sim('cp2').receivedConfigs).toHaveLength(5);
    expect(c.sim('cp1').pulledCriImages.filter((i) => i === img('kube-apiserver', TO))).toHaveLength(1);
    expect(await k8sVersion(h, c)).toBe(TO);
    // Done: the cluster's version says it all again.
    expect(await heldComponents(h, c)).toEqual({ cp1: null, cp2: null, w1: null });
  });

  it('a node that runs another config than RezusCloud renders (a patch not pushed yet) stops the run before any step; includePendingConfig takes it along', async () => {
    const { h, c } = await setup(fleet(1, 1));
    const patched = await h.call('PATCH', `/v1/clusters/${c.clusterId}/machines/${c.machineIds.get('w1')}`, { body: { patches: [{ machine: { sysctls: { 'vm.swappiness': '10' } } }] } });
    expect(patched.status).toBe(200);
    const first = await finishedRun(h, await start(h, c));
    expect(first.state).toBe('failed');
    expect(first.error).toMatch(/^refusing to upgrade Kubernetes: these nodes run another config than RezusCloud renders for them now, apart from the upgrade's images: w1 \(v1alpha1\); .*includePendingConfig: true$/);
    // It names documents, never what is in them.
    expect(first.error).not.toContain('swappiness');
    await expectUntouched(h, c, ['cp1', 'w1']);

    const second = await finishedRun(h, await start(h, c, TO, { includePendingConfig: true }));
    expect(second.state).toBe('succeeded');
    const warned = (await events(h, second.id)).filter((e) => e.type === 'k8s.precheck' && e.level === 'warn');
    expect(warned.map((e) => e.message)).toEqual([expect.stringMatching(/^includePendingConfig: upgrading anyway; .*: w1 \(v1alpha1\); /)]);
    expect(new TextDecoder().decode(c.sim('w1').receivedConfigs.at(-1)!.data)).toContain('vm.swappiness');
    expect(await k8sVersion(h, c)).toBe(TO);
  });

  it('a Talos upgrade since the last push (the render names a newer installer) is not a pending change', async () => {
    const { h, c } = await setup(fleet(1, 1), { talosVersion: 'v1.13.9' });
    // As a Talos upgrade leaves it: the nodes on the new version, recorded so, and no config pushed.
    for (const n of ['cp1', 'w1']) c.sim(n).version = TALOS;
    await h.deps.db.update(clusters).set({ talosVersion: TALOS }).where(eq(clusters.id, c.clusterId));
    await h.deps.db.update(machines).set({ talosVersion: TALOS }).where(eq(machines.clusterId, c.clusterId));
    const run = await finishedRun(h, await start(h, c));
    expect(run.state, run.error).toBe('succeeded');
    expect((await events(h, run.id)).filter((e) => e.type === 'k8s.precheck' && e.level === 'warn')).toEqual([]);
  });

  it('a manifest sync that fails leaves the version unrecorded; the next run skips every step done and only syncs', async () => {
    const { h, c } = await setup(fleet(1, 0));
    const claimed = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'coredns', namespace: 'kube-system', annotations: { 'config.k8s.io/owning-inventory': 'argo' } }, spec: { replicas: 1, selector: { matchLabels: { 'k8s-app': 'kube-dns' } } } };
    c.kube.putObject(claimed, { manager: 'argo' });
    const first = await finishedRun(h, await start(h, c));
    expect(first.state).toBe('failed');
    expect(first.error).toBe('refusing to sync the bootstrap manifests: Deployment.apps kube-system/coredns belongs to inventory argo (policy AdoptIfNoInventory)');
    expect(await k8sVersion(h, c)).toBe(FROM);
    expect(c.kube.object('v1', 'ConfigMap', 'kube-system', 'talos-bootstrap-manifests-inventory')).toBeUndefined();

    // Taken over with the AdoptAll policy, the next run has nothing left but the sync.
    const second = await finishedRun(h, await start(h, c, TO, { manifestsInventoryPolicy: 'AdoptAll' }));
    expect(second.error).toBeNull();
    expect(second.params.manifestsInventoryPolicy).toBe('AdoptAll');
    expect(second.result.upgraded).toEqual(['bootstrap manifests']);
    expect(second.result.skipped).toEqual(['kube-apiserver on cp1', 'kube-controller-manager on cp1', 'kube-scheduler on cp1', 'kube-proxy', 'kubelet on cp1']);
    expect(c.sim('cp1').receivedConfigs).toHaveLength(5);
    expect(await k8sVersion(h, c)).toBe(TO);
    expect((c.kube.object('apps/v1', 'Deployment', 'kube-system', 'coredns') as Json).metadata.annotations['config.k8s.io/owning-inventory']).toBe('talos-bootstrap-manifests-inventory');
  });

  it('a new run to another release starts from what the stopped one moved, never back from it', async () => {
    const { h, c, link } = await setup(fleet(1, 0));
    link.stall('cp1', 'kube-scheduler');
    const first = await finishedRun(h, await start(h, c));
    expect(first.state).toBe('failed');
    expect(await heldComponents(h, c)).toEqual({ cp1: { 'kube-apiserver': TO, 'kube-controller-manager': TO, 'kube-scheduler': TO } });

    link.unstall('cp1', 'kube-scheduler');
    const next = '1.37.1';
    const second = await finishedRun(h, await start(h, c, next));
    expect(second.state).toBe('succeeded');
    // Its first step moves kube-apiserver on to 1.37.1 and leaves the other two on 1.37.0, where the stopped run took them.
    expect(sentImages(c, 'cp1')[3]).toMatchObject({ apiServer: img('kube-apiserver', next), controllerManager: img('kube-controller-manager', TO), scheduler: img('kube-scheduler', TO), proxy: img('kube-proxy', FROM) });
    expect(sentImages(c, 'cp1').at(-1)).toMatchObject({ apiServer: img('kube-apiserver', next), scheduler: img('kube-scheduler', next), kubelet: `ghcr.io/siderolabs/kubelet:v${next}` });
    expect(await k8sVersion(h, c)).toBe(next);
    expect(await heldComponents(h, c)).toEqual({ cp1: null });
  });

  it('refuses to start on a cluster that is not healthy, before anything is pulled; force goes on with a warning', async () => {
    const { h, c } = await setup(fleet(1, 1));
    c.kube.setNode('w1', { ready: false });
    const refused = await finishedRun(h, await start(h, c));
    expect(refused.state).toBe('failed');
    expect(refused.error).toMatch(/^refusing to upgrade Kubernetes: cluster not healthy: .*w1/);
    await expectUntouched(h, c, ['cp1', 'w1']);

    const res = await h.call('POST', `/v1/clusters/${c.clusterId}/upgrade-kubernetes`, { body: { version: TO, force: true } });
    expect(res.body.run.params.force).toBe(true);
    await finishedRun(h, res.body.run.id);
    const precheck = (await events(h, res.body.run.id)).filter((e) => e.type === 'k8s.precheck');
    expect(precheck).toMatchObject([{ level: 'warn', message: expect.stringMatching(/^force: upgrading anyway; cluster not healthy: .*w1/) }]);
    // It went on: the control plane's components moved.
    expect(sentImages(c, 'cp1')[0]).toMatchObject({ apiServer: img('kube-apiserver', TO) });
  });

  it('takes an etcd snapshot right before the first step, refuses to go on without one, and skips it when told', async () => {
    const { h, c } = await setup(fleet(2, 0));
    await h.deps.db.update(clusters).set({ bootstrappedAt: Date.now() }).where(eq(clusters.id, c.clusterId));
    for (const cp of ['cp1', 'cp2']) c.sim(cp).setEtcdErrors(['etcdserver: no leader']);
    // force gets it past the health check, which an etcd in this state fails first.
    const forced = await h.call('POST', `/v1/clusters/${c.clusterId}/upgrade-kubernetes`, { body: { version: TO, force: true } });
    const refused = await finishedRun(h, forced.body.run.id);
    expect(refused.state).toBe('failed');
    expect(refused.error).toBe(
      'refusing to upgrade without an etcd snapshot: no healthy control plane to snapshot from: cp1: etcdserver: no leader; cp2: etcdserver: no leader; nothing was touched (etcdSnapshot: false upgrades without one)',
    );
    for (const cp of ['cp1', 'cp2']) expect(c.sim(cp).receivedConfigs).toEqual([]);
    expect(await heldComponents(h, c)).toEqual({ cp1: null, cp2: null });

    for (const cp of ['cp1', 'cp2']) c.sim(cp).setEtcdErrors([]);
    const runId = await start(h, c);
    expect((await finishedRun(h, runId)).error).toBeNull();
    const snapshots = (await h.call('GET', `/v1/clusters/${c.clusterId}/etcd-snapshots`)).body.snapshots as Json[];
    expect(snapshots).toMatchObject([{ trigger: 'upgrade', runId, machine: 'cp1' }]);
    const evs = await events(h, runId);
    const taken = evs.find((e) => e.type === 'etcd.snapshot.done');
    expect(taken.data.id).toBe(snapshots[0].id);
    expect(taken.seq).toBeLessThan(evs.find((e) => e.type === 'k8s.apply').seq);

    // A run told not to says so, and stores none.
    const res = await h.call('POST', `/v1/clusters/${c.clusterId}/upgrade-kubernetes`, { body: { version: '1.37.1', etcdSnapshot: false } });
    expect(res.body.run.params.etcdSnapshot).toBe(false);
    expect((await finishedRun(h, res.body.run.id)).error).toBeNull();
    expect((await events(h, res.body.run.id)).filter((e) => e.type.startsWith('etcd.snapshot'))).toMatchObject([{ level: 'warn', type: 'etcd.snapshot.skip' }]);
    expect((await h.call('GET', `/v1/clusters/${c.clusterId}/etcd-snapshots`)).body.snapshots).toHaveLength(1);
  });

  it('a kube-proxy rollout that never completes stops the run before any kubelet', async () => {
    const { h, c } = await setup(fleet(1, 1));
    c.kube.setRollout({ stuck: true });
    const run = await finishedRun(h, await start(h, c));
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^kube-proxy did not become ready on 1\.37\.0 within 1s: kube-proxy rollout: 0\/2 updated, 0 available$/);
    // The DaemonSet was patched with the image the control planes' configs now carry.
    expect(c.kube.daemonSet('kube-system', 'kube-proxy')?.image).toBe(img('kube-proxy', TO));
    expect(c.kube.writes.filter((w) => w.path.endsWith('/daemonsets/kube-proxy')).map((w) => w.method)).toEqual(['PATCH']);
    expect(sentImages(c, 'cp1').map((x) => x.kubelet)).toEqual(Array(4).fill(`ghcr.io/siderolabs/kubelet:v${FROM}`));
    expect(c.sim('w1').receivedConfigs).toEqual([]);
    expect(await k8sVersion(h, c)).toBe(FROM);
  });

  it('cancel lets the step in flight finish and starts nothing after it', async () => {
    const { h, c, link } = await setup(fleet(2, 0), { gateTimeoutMs: 20_000 });
    // The first step cannot finish until the test lets it, so the cancel surely lands while it is in flight.
    link.stall('cp1', 'kube-apiserver');
    const runId = await start(h, c);
    for (let i = 0; ; i++) {
      if ((await events(h, runId)).some((e) => e.type === 'k8s.wait')) break;
      if (i > 800) throw new Error('the first step never started waiting');
      await new Promise((r) => setTimeout(r, 10));
    }
    expect((await h.call('POST', `/v1/runs/${runId}/cancel`)).status).toBe(202);
    link.unstall('cp1', 'kube-apiserver');
    const run = await finishedRun(h, runId);
    expect(run.state).toBe('canceled');
    const evs = await events(h, runId);
    expect(evs.filter((e) => e.type === 'k8s.step.done').map((e) => e.data.step)).toEqual(['kube-apiserver on cp1']);
    expect(evs.filter((e) => e.type === 'k8s.step.start')).toHaveLength(1);
    expect(c.kube.pods('cp1').find((p) => p.name === 'kube-apiserver-cp1')).toMatchObject({ image: img('kube-apiserver', TO), ready: true });
    expect(c.sim('cp1').receivedConfigs).toHaveLength(1);
    expect(c.sim('cp2').receivedConfigs).toEqual([]);
    expect(run.result.remaining).toEqual([...STEPS_2CP_1W.slice(1, -1), 'bootstrap manifests']); // no w1 in this cluster
    expect(await k8sVersion(h, c)).toBe(FROM);
  });

  it('refuses to start when a node runs a Talos that does not support the target: nothing is pulled or applied', async () => {
    const { h, c } = await setup([...fleet(1, 0), { name: 'w1', role: 'worker', version: 'v1.13.9' }]);
    const run = await finishedRun(h, await start(h, c));
    expect(run.state).toBe('failed');
    expect(run.error).toBe('refusing to upgrade Kubernetes: w1: Kubernetes 1.37.0 is too new for Talos v1.13.9 (it runs 1.31 to 1.36)');
    await expectUntouched(h, c, ['cp1', 'w1']);
  });
});

describe('what the target Kubernetes removes', () => {
  const WORKLOADS = { group: 'scheduling.k8s.io', version: 'v1alpha2', resource: 'workloads', kind: 'Workload' };

  it('objects of an API the target no longer serves stop the run before anything is pulled; once gone, the upgrade runs', async () => {
    const { h, c } = await setup(fleet(1, 1));
    c.kube.setResource(WORKLOADS, [{ namespace: 'batch', name: 'train' }, { namespace: 'batch', name: 'eval' }]);
    const refused = await finishedRun(h, await start(h, c));
    expect(refused.state).toBe('failed');
    expect(refused.error).toBe('refusing to upgrade to 1.37.0: Kubernetes 1.37 removes what the cluster still uses: 2 workloads.v1alpha2.scheduling.k8s.io objects');
    expect(c.kube.requests).toContain('/apis/scheduling.k8s.io/v1alpha2/workloads');
    await expectUntouched(h, c, ['cp1', 'w1']);

    // Served but empty passes, as does a version the server no longer serves at all (404).
    c.kube.setResource(WORKLOADS, []);
    c.kube.setResource({ ...WORKLOADS, resource: 'podgroups', kind: 'PodGroup' }, undefined);
    const runId = await start(h, c);
    const run = await finishedRun(h, runId);
    expect(run.error).toBeNull();
    expect(run.state).toBe('succeeded');
    const check = (await events(h, runId)).find((e) => e.type === 'k8s.check');
    expect(check).toMatchObject({ level: 'info', data: { checked: true } });
    expect(check.message).toMatch(/^nothing Kubernetes 1\.37\.0 removes is in use: 5 feature gates, 18 flags, 0 admission plugins and 2 APIs checked$/);
    expect(await k8sVersion(h, c)).toBe(TO);
  });

  it('a flag the target removed, set in a patch after the run was queued, stops the run before any node moves', async () => {
    const { h, c } = await setup(fleet(1, 1), { startWorker: false });
    const runId = await start(h, c);
    // The route saw clean configs; the run renders again and finds the patch.
    const patched = await h.call('PATCH', `/v1/clusters/${c.clusterId}/machines/${c.machineIds.get('w1')}`, {
      body: { patches: [{ machine: { kubelet: { extraArgs: { 'boot-id-file': '/etc/boot-id' } } } }] },
    });
    expect(patched.status).toBe(200);
    worker!.start();
    const run = await finishedRun(h, runId);
    expect(run.state).toBe('failed');
    expect(run.error).toBe('refusing to upgrade to 1.37.0: Kubernetes 1.37 removes what the cluster still uses: kubelet flag --boot-id-file (machine.kubelet.extraArgs) on w1');
    await expectUntouched(h, c, ['cp1', 'w1']);
  });
});

describe('what the target Kubernetes removes, beyond what is known', () => {
  it('a patch release is not checked: it removes nothing', async () => {
    const { h, c } = await setup(fleet(1, 0));
    const patchRun = await start(h, c, '1.36.5');
    expect((await finishedRun(h, patchRun)).state).toBe('succeeded');
    expect((await events(h, patchRun)).filter((e) => e.type === 'k8s.check')).toEqual([]);
    expect(c.kube.requests.filter((r) => r.startsWith('/apis/scheduling.k8s.io/'))).toEqual([]);
  });

  it('warns that a minor it has no list for was not checked, and upgrades', async () => {
    const { h, c } = await setup(fleet(1, 0), { talosVersion: 'v1.15.0', kubernetesVersion: '1.37.2' });
    const runId = await start(h, c, '1.38.0');
    const run = await finishedRun(h, runId);
    expect(run.error).toBeNull();
    expect(run.state).toBe('succeeded');
    const check = (await events(h, runId)).filter((e) => e.type === 'k8s.check');
    expect(check).toMatchObject([{ level: 'warn', message: 'RezusCloud does not know what Kubernetes 1.38.0 removes: its flags, feature gates and APIs were not checked', data: { checked: false } }]);
    expect(await k8sVersion(h, c)).toBe('1.38.0');
  });
});

describe('POST /v1/clusters/:id/upgrade-kubernetes validation', () => {
  it('rejects bad input with a clear 4xx and changes nothing', async () => {
    h = await createHarness();
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'v' } });
    const mk = async (name: string, talosVersion: string) =>
      (await h!.call('POST', '/v1/clusters', { body: { tenant: t.body.id, name, talosVersion, kubernetesVersion: FROM, endpoint: 'https://[2001:db8::1]:6443' } })).body.id as string;
    const id = await mk('c', TALOS);
    const path = `/v1/clusters/${id}/upgrade-kubernetes`;
    const post = (body: unknown, p = path) => h!.call('POST', p, { body });

    expect((await post({ version: TO })).status).toBe(409); // no machines yet
    for (const [name, role] of [['cp1', 'controlplane'], ['w1', 'worker']]) {
      await h.call('POST', `/v1/clusters/${id}/machines`, { body: { name, role, provider: 'metal', address: '2001:db8::10' } });
    }
    const cases: Array<[unknown, number, string]> = [
      [{ version: 'latest' }, 400, 'invalid_request'],
      [{ version: TO, surprise: 1 }, 400, 'invalid_request'],
      [{ version: TO, etcdSnapshot: 'yes' }, 400, 'invalid_request'],
      [{}, 400, 'invalid_request'],
      [{ version: '1.35.9' }, 409, 'downgrade_refused'],
      [{ version: FROM }, 409, 'same_version'],
      [{ version: '1.38.0' }, 409, 'unsupported_upgrade_path'],
      [{ version: '2.0.0' }, 409, 'unsupported_upgrade_path'],
    ];
    for (const [body, status, code] of cases) {
      const res = await post(body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.body.error.code).toBe(code);
      expect(res.body.error.message.length).toBeGreaterThan(0);
    }
    expect((await post({ version: TO }, '/v1/clusters/nope/upgrade-kubernetes')).status).toBe(404);

    // v1.13 runs Kubernetes up to 1.36.
    const old = await mk('old', 'v1.13.9');
    await h.call('POST', `/v1/clusters/${old}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'metal', address: '2001:db8::11' } });
    const unsupported = await post({ version: TO }, `/v1/clusters/${old}/upgrade-kubernetes`);
    expect(unsupported.status).toBe(409);
    expect(unsupported.body.error).toMatchObject({ code: 'unsupported_by_talos', message: 'Kubernetes 1.37.0 is too new for Talos v1.13.9 (it runs 1.31 to 1.36)' });

    expect((await h.call('GET', `/v1/runs?cluster=${id}`)).body.runs).toEqual([]);
    expect((await h.call('GET', `/v1/runs?cluster=${old}`)).body.runs).toEqual([]);
    expect((await h.call('GET', `/v1/clusters/${id}`)).body.kubernetesVersion).toBe(FROM);

    // A cluster patch that sets what 1.37 removed: refused up front, naming each use and where it is set.
    const gated = { cluster: { apiServer: { extraArgs: { 'feature-gates': 'GangScheduling=true' } } }, machine: { kubelet: { extraConfig: { featureGates: { AnyVolumeDataSource: true } } } } };
    expect((await h.call('PATCH', `/v1/clusters/${id}`, { body: { patches: [gated] } })).status).toBe(200);
    const removed = await post({ version: TO });
    expect(removed.status).toBe(409);
    expect(removed.body.error.code).toBe('removed_in_target');
    expect(removed.body.error.message).toBe(
      'Kubernetes 1.37 removes what the cluster still uses: kube-apiserver feature gate GangScheduling (cluster.apiServer.extraArgs) on cp1; ' +
        "kubelet feature gate AnyVolumeDataSource (machine.kubelet.extraConfig.featureGates) on cp1, w1; take them out of the cluster's or machines' patches first",
    );
    expect(removed.body.error.details.uses).toHaveLength(2);
    expect((await h.call('GET', `/v1/runs?cluster=${id}`)).body.runs).toEqual([]);
    expect((await h.call('PATCH', `/v1/clusters/${id}`, { body: { patches: [] } })).status).toBe(200);

    const ok = await post({ version: `v${TO}` });
    expect(ok.status).toBe(202);
    expect(ok.body.run.params).toEqual({ fromVersion: FROM, kubernetesVersion: TO });
    const again = await post({ version: TO });
    expect(again.status).toBe(409);
    expect(again.body.error.details.activeRun).toBe(ok.body.run.id);
    // A Talos upgrade is refused too while this one is active.
    expect((await h.call('POST', `/v1/clusters/${id}/upgrade`, { body: { talosVersion: 'v1.14.1' } })).status).toBe(409);

    const ro = await h.call('POST', `/v1/tenants/${t.body.id}/tokens`, { body: { name: 'ro', scopes: ['read'] } });
    expect((await h.call('POST', path, { body: { version: TO }, token: ro.body.token })).status).toBe(403);
  });
});

describe('dashboard: Upgrade Kubernetes', () => {
  it('queues the run from the cluster page, and shows the API\'s refusal next to the form', async () => {
    h = await createHarness();
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'd' } });
    const cl = await h.call('POST', '/v1/clusters', { body: { tenant: t.body.id, name: 'c', talosVersion: TALOS, kubernetesVersion: FROM, endpoint: 'https://[2001:db8::1]:6443' } });
    await h.call('POST', `/v1/clusters/${cl.body.id}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'metal', address: '2001:db8::10' } });
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const page = `/clusters/${cl.body.id}`;
    expect((await b.get(page)).text).toContain('Upgrade Kubernetes');

    const refused = await b.submit(page, `${page}/upgrade-kubernetes`, { version: '1.38.0' });
    expect(refused.status).toBe(409);
    expect(alertOf(refused.text)).toMatch(/unsupported upgrade path 1\.36->1\.38/);
    expect(refused.text).toContain('value="1.38.0"');
    expect((await h.call('GET', `/v1/runs?cluster=${cl.body.id}`)).body.runs).toEqual([]);

    const ok = await b.submit(page, `${page}/upgrade-kubernetes`, { version: TO, etcdSnapshot: 'on', manifests: 'on' });
    expect(ok.location).toMatch(/^\/runs\//);
    const runs = (await h.call('GET', `/v1/runs?cluster=${cl.body.id}`)).body.runs;
    expect(runs.map((r: Json) => [r.kind, r.params])).toEqual([['upgrade-kubernetes', { fromVersion: FROM, kubernetesVersion: TO }]]);
    // Unticked, the box skips the manifest sync (the first run is canceled so the cluster is free).
    expect((await h.call('POST', `/v1/runs/${runs[0].id}/cancel`)).status).toBe(202);
    await b.submit(page, `${page}/upgrade-kubernetes`, { version: TO, etcdSnapshot: 'on' });
    const again = (await h.call('GET', `/v1/runs?cluster=${cl.body.id}`)).body.runs as Json[];
    expect(again.find((r) => r.id !== runs[0].id)?.params).toEqual({ fromVersion: FROM, kubernetesVersion: TO, manifests: false });
    // Ticked, the last box lets that sync recreate what it cannot change in place.
    for (const r of again) await h.call('POST', `/v1/runs/${r.id}/cancel`);
    await b.submit(page, `${page}/upgrade-kubernetes`, { version: TO, etcdSnapshot: 'on', manifests: 'on', recreateManifests: 'on' });
    const third = ((await h.call('GET', `/v1/runs?cluster=${cl.body.id}`)).body.runs as Json[]).find((r) => !again.some((a) => a.id === r.id));
    expect(third?.params).toEqual({ fromVersion: FROM, kubernetesVersion: TO, recreateManifests: true });
    // Ticked, the pending-config box lets changes not pushed yet go with the upgrade.
    for (const r of (await h.call('GET', `/v1/runs?cluster=${cl.body.id}`)).body.runs as Json[]) await h.call('POST', `/v1/runs/${r.id}/cancel`);
    await b.submit(page, `${page}/upgrade-kubernetes`, { version: TO, etcdSnapshot: 'on', manifests: 'on', includePendingConfig: 'on' });
    const fourth = ((await h.call('GET', `/v1/runs?cluster=${cl.body.id}`)).body.runs as Json[])[0];
    expect(fourth?.params).toEqual({ fromVersion: FROM, kubernetesVersion: TO, includePendingConfig: true });
  });
});
