// Talos upgrades the node's installer would refuse (its pre-flight check, upstream UpgradeableFrom):
// refused by the route before anything is drained, and, when a stale record lets one through, the
// run stops at that node as the installer says.
import { afterEach, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import type { Deps } from '../functions/context.ts';
import { upgradeJob } from '../functions/upgrade/job.ts';
import { upgradeExecutor } from '../runner/jobs/upgrade/executor.ts';
import { bind } from '../runner/jobs/registry.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { loadKubernetesClient } from '../lib/kube/index.ts';
import { machines } from '../db/schema/index.ts';
import { createHarness, finishedRun, type Harness } from './support/harness.ts';
import type { Json } from './support/api-caller.ts';
import { alertOf, FormClient } from './support/dashboard-client.ts';
import { startUpgradeCluster, type MachineSpec, type UpgradeCluster } from './support/upgrade-cluster.ts';

const UPGRADE_CALLS = ['Upgrade', 'ImageService/Pull', 'LifecycleService/Upgrade', 'Reboot'];
const TOO_OLD =
  'cp1, w1: v1.10.4 is too old to upgrade to Talos v1.13.9 (Talos v1.13 installs over v1.11.0 or later), so upgrade to v1.12.x first. ' +
  "The node's installer checks this before it installs, after the drain, and refuses; force does not skip that check";

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

/** A cluster whose machines point at a port that refuses: a run that got past the route would fail on its first dial. */
async function offlineCluster(hh: Harness, talosVersion: string, kubernetesVersion: string, recorded: Record<string, string> = {}): Promise<{ id: string; path: string }> {
  const t = await hh.call('POST', '/v1/tenants', { body: { name: `t${talosVersion.replace(/\W/g, '')}` } });
  const cl = await hh.call('POST', '/v1/clusters', { body: { tenant: t.body.id, name: 'c', talosVersion, kubernetesVersion, endpoint: 'https://127.0.0.1:1' } });
  expect(cl.status).toBe(201);
  for (const [name, role] of [['cp1', 'controlplane'], ['w1', 'worker'], ['w2', 'worker']] as const) {
    const m = await hh.call('POST', `/v1/clusters/${cl.body.id}/machines`, { body: { name, role, provider: 'metal', address: '127.0.0.1:1' } });
    expect(m.status).toBe(201);
    if (recorded[name]) await hh.deps.db.update(machines).set({ talosVersion: recorded[name] }).where(eq(machines.id, m.body.id));
  }
  return { id: cl.body.id, path: `/v1/clusters/${cl.body.id}/upgrade` };
}

async function versions(hh: Harness, clusterId: string): Promise<{ cluster: string; machines: Record<string, string | null> }> {
  const list = (await hh.call('GET', `/v1/clusters/${clusterId}/machines`)).body.machines as Json[];
  return { cluster: (await hh.call('GET', `/v1/clusters/${clusterId}`)).body.talosVersion, machines: Object.fromEntries(list.map((m) => [m.name, m.talosVersion])) };
}

const runsOf = async (hh: Harness, clusterId: string): Promise<Json[]> => (await hh.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs;

describe('POST /v1/clusters/:id/upgrade: what the installer would refuse', () => {
  it('refuses machines too old for the target, force or not, queuing and changing nothing; the step it names is accepted', async () => {
    h = await createHarness();
    // cp1 and w1 were read on v1.10.4 (older than the cluster record); w2 has no record and counts as the cluster's.
    const { id, path } = await offlineCluster(h, 'v1.12.11', '1.33.2', { cp1: 'v1.10.4', w1: 'v1.10.4' });
    const before = await versions(h, id);
    expect(before).toEqual({ cluster: 'v1.12.11', machines: { cp1: 'v1.10.4', w1: 'v1.10.4', w2: null } });

    for (const force of [undefined, true]) {
      const res = await h.call('POST', path, { body: { talosVersion: 'v1.13.9', ...(force ? { force } : {}) } });
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe('unsupported_upgrade_path');
      expect(res.body.error.message).toBe(TOO_OLD);
      expect(res.body.error.details).toEqual({
        talosVersion: 'v1.13.9',
        machines: [
          { name: 'cp1', talosVersion: 'v1.10.4', code: 'host_too_old' },
          { name: 'w1', talosVersion: 'v1.10.4', code: 'host_too_old' },
        ],
      });
    }
    expect(await runsOf(h, id)).toEqual([]);
    expect(await versions(h, id)).toEqual(before);

    const step = await h.call('POST', path, { body: { talosVersion: 'v1.12.11' } });
    expect(step.status).toBe(202);
  });

  it('refuses machines too new for the target before the downgrade check, counting unrecorded ones as the cluster\'s, and force does not get past it', async () => {
    h = await createHarness();
    const { id, path } = await offlineCluster(h, 'v1.14.1', '1.33.2');
    for (const force of [undefined, true]) {
      const res = await h.call('POST', path, { body: { talosVersion: 'v1.12.11', ...(force ? { force } : {}) } });
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe('unsupported_upgrade_path');
      expect(res.body.error.message).toMatch(/^cp1, w1, w2: v1\.14\.1 is too new to downgrade to Talos v1\.12\.11 \(Talos v1\.12 installs over versions before v1\.14\.0\), so downgrade to v1\.13\.x first\. .*force does not skip that check$/);
      expect(res.body.error.details.machines.map((m: Json) => [m.name, m.talosVersion, m.code])).toEqual([
        ['cp1', 'v1.14.1', 'host_too_new'],
        ['w1', 'v1.14.1', 'host_too_new'],
        ['w2', 'v1.14.1', 'host_too_new'],
      ]);
    }
    expect(await runsOf(h, id)).toEqual([]);
    expect(await versions(h, id)).toEqual({ cluster: 'v1.14.1', machines: { cp1: null, w1: null, w2: null } });
    // One minor back is the installer's to take: only the product's own downgrade rule applies, and force takes that.
    expect((await h.call('POST', path, { body: { talosVersion: 'v1.13.9' } })).body.error.code).toBe('downgrade_refused');
    expect((await h.call('POST', path, { body: { talosVersion: 'v1.13.9', force: true } })).status).toBe(202);
  });

  it('the dashboard upgrade form shows the same refusal', async () => {
    h = await createHarness();
    const { id } = await offlineCluster(h, 'v1.12.11', '1.33.2', { cp1: 'v1.10.4', w1: 'v1.10.4' });
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const res = await b.submit(`/clusters/${id}`, `/clusters/${id}/upgrade`, { talosVersion: 'v1.13.9', etcdSnapshot: 'on' });
    expect(res.status).toBe(409);
    expect(alertOf(res.text)).toBe(TOO_OLD);
    expect(await runsOf(h, id)).toEqual([]);
  });
});

describe('a run that meets a node its installer refuses', () => {
  async function setup(specs: MachineSpec[], rebootTimeoutMs = 10_000): Promise<UpgradeCluster> {
    h = await createHarness({
      patchDeps: (d: Deps) => {
        d.settings.upgrade = { pollMs: 20, callDeadlineMs: 2_000, rebootTimeoutMs, gateTimeoutMs: 800, kubeDeadlineMs: 3_000 };
      },
    });
    cluster = await startUpgradeCluster(h, { talosVersion: 'v1.13.2', machines: specs });
    await loadKubernetesClient();
    worker = createWorker({ deps: h.deps, executors: Object.fromEntries([bind(upgradeJob, upgradeExecutor)]), workerId: 'test', leaseMs: 5_000, concurrency: 1, pollMs: 20 });
    worker.start();
    return cluster;
  }

  const touched = (c: UpgradeCluster, name: string) => c.sim(name).calls.filter((x) => UPGRADE_CALLS.includes(x.method));

  it('a node moved by hand past what the inventory says is refused before it is touched, force or not', async () => {
    // Moved to v1.15.0 by hand: the inventory still counts it as the cluster's v1.13.2.
    const c = await setup([
      { name: 'cp1', role: 'controlplane' },
      { name: 'w1', role: 'worker', version: 'v1.15.0' },
      { name: 'w2', role: 'worker' },
    ]);
    c.kube.setPod({ namespace: 'apps', name: 'web-w1', nodeName: 'w1', labels: { app: 'web' }, ownerKind: 'ReplicaSet' });
    // force takes the live minor-downgrade check, not this one.
    const start = await h!.call('POST', `/v1/clusters/${c.clusterId}/upgrade`, { body: { talosVersion: 'v1.13.9', force: true } });
    expect(start.status).toBe(202);
    const run = await finishedRun(h!, start.body.run.id);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^refusing to upgrade: w1: v1\.15\.0 is too new to downgrade to Talos v1\.13\.9 .*force does not skip that check$/);

    // Neither worker was drained, pulled or installed; the control plane before them was upgraded.
    expect(touched(c, 'w1')).toEqual([]);
    expect(touched(c, 'w2')).toEqual([]);
    expect(c.kube.writes.filter((x) => x.path === '/api/v1/nodes/w1' || x.path.includes('/pods/web-w1'))).toEqual([]);
    expect(c.sim('w1').version).toBe('v1.15.0');
    expect(c.sim('cp1').version).toBe('v1.13.9');

    // The run recorded what w1 runs, so the route now refuses it up front.
    expect((await versions(h!, c.clusterId)).machines.w1).toBe('v1.15.0');
    const again = await h!.call('POST', `/v1/clusters/${c.clusterId}/upgrade`, { body: { talosVersion: 'v1.13.9', force: true } });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('unsupported_upgrade_path');
    expect(again.body.error.details.machines).toEqual([{ name: 'w1', talosVersion: 'v1.15.0', code: 'host_too_new' }]);
  });

  it('a node older than the inventory says is refused before the legacy API drains it and stops its services', async () => {
    const c = await setup([
      { name: 'cp1', role: 'controlplane' },
      { name: 'w1', role: 'worker', version: 'v1.10.5' },
      { name: 'w2', role: 'worker' },
    ]);
    const start = await h!.call('POST', `/v1/clusters/${c.clusterId}/upgrade`, { body: { talosVersion: 'v1.13.9' } });
    expect(start.status).toBe(202);
    const run = await finishedRun(h!, start.body.run.id);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^refusing to upgrade: w1: v1\.10\.5 is too old to upgrade to Talos v1\.13\.9 \(Talos v1\.13 installs over v1\.11\.0 or later\), so upgrade to v1\.12\.x first/);
    const w1 = c.sim('w1');
    expect(w1.upgrades).toEqual([]);
    expect(w1.reboots).toEqual([]);
    expect(touched(c, 'w2')).toEqual([]);
    const again = await h!.call('POST', `/v1/clusters/${c.clusterId}/upgrade`, { body: { talosVersion: 'v1.13.9', force: true } });
    expect(again.status).toBe(409);
    expect(again.body.error.details.machines).toEqual([{ name: 'w1', talosVersion: 'v1.10.5', code: 'host_too_old' }]);
  });
});
