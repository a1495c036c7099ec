/**
 * Rolling-upgrade wall time against its floor. 3 control planes + 30 workers, every sim reboot
 * takes 2 s, and every node is drained first: two pods per node, each taking 300 ms to terminate
 * once evicted (simulated eviction latency). Batch sizes 1 and 5. Floor: one drain and one reboot
 * per step (3 CP steps + ceil(30/batch) worker steps) × (0.3 s + 2 s). Everything above it is
 * RezusCloud's own cost: API calls, evictions, polls, health gates.
 * The Talos sims and the Kubernetes API sim run in child processes (bench/sim-fleet.ts), so the
 * wall time is not stretched by simulated nodes minting certificates on the product's event loop.
 * Usage: npx tsx bench/upgrade.ts
 */
import { upgradeJob } from '../functions/upgrade/job.ts';
import { upgradeExecutor } from '../runner/jobs/upgrade/executor.ts';
import { bind } from '../runner/jobs/registry.ts';
import { createWorker } from '../runner/worker.ts';
import { createHarness, sharedSecrets, type Harness } from '../test/support/harness.ts';
import type { SimPodSpec } from '../test/sim/kube/server.ts';
import { fleet, type MachineSpec } from '../test/support/upgrade-cluster.ts';
import { runFinished } from './run-wait.ts';
import { startSimFleet } from './sim-fleet.ts';

const CONTROL_PLANES = 3;
const WORKERS = 30;
const REBOOT_MS = 2_000;
const POLL_MS = 200;
const EVICTION_MS = 300;

type Sims = ReturnType<typeof startSimFleet>;

/** What test/support/upgrade-cluster.ts sets up, with every sim in a child process. */
async function remoteUpgradeCluster(h: Harness, sims: Sims, machines: MachineSpec[]): Promise<string> {
  const secrets = await sharedSecrets();
  const pods: SimPodSpec[] = machines.flatMap(({ name }) => [
    { namespace: 'apps', name: `web-${name}`, nodeName: name, labels: { app: 'web' }, ownerKind: 'ReplicaSet' },
    { namespace: 'apps', name: `cache-${name}`, nodeName: name, ownerKind: 'StatefulSet', emptyDir: true },
    { namespace: 'kube-system', name: `proxy-${name}`, nodeName: name, ownerKind: 'DaemonSet' },
  ]);
  const nodes = Object.fromEntries(machines.map((m) => [m.name, { roles: m.role === 'controlplane' ? ['control-plane'] : [] }]));
  const kubeUrl = await sims<string>({ op: 'kube-cluster', ca: secrets.certs.k8s, nodes, pods, evictionLatencyMs: EVICTION_MS });
  const t = await h.call('POST', '/v1/tenants', { body: { name: `t${Date.now().toString(36)}` } });
  const cl = await h.call('POST', '/v1/clusters', { body: { tenant: t.body.id, name: 'up', talosVersion: 'v1.13.2', kubernetesVersion: '1.36.3', endpoint: kubeUrl } });
  if (cl.status !== 201) throw new Error(`cluster: ${cl.status} ${JSON.stringify(cl.body)}`);
  const clusterId = cl.body.id as string;
  // The sim's port is known only once it listens; the config does not depend on it.
  const created = await Promise.all(
    machines.map(async (spec) => {
      const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: spec.name, role: spec.role, provider: 'metal', address: '127.0.0.1:1' } });
      if (m.status !== 201) throw new Error(`machine ${spec.name}: ${m.status} ${JSON.stringify(m.body)}`);
      const config = await h.call('GET', `/v1/clusters/${clusterId}/machines/${m.body.id}/config`);
      if (config.status !== 200) throw new Error(`config ${spec.name}: ${config.status}`);
      return { id: m.body.id as string, config: config.body as string };
    }),
  );
  const members = machines.filter((m) => m.role === 'controlplane').map((m, i) => ({ id: String(1000 + i), hostname: m.name }));
  const addresses = await sims<string[]>({
    op: 'talos',
    latencyMs: 0,
    workerIssuer: secrets.certs.os,
    nodes: machines.map((spec, i) => ({
      config: created[i]!.config,
      version: 'v1.13.2',
      rebootMs: REBOOT_MS,
      ...(spec.role === 'controlplane' ? { etcdMembers: members, etcdLeader: members.at(-1)!.id } : {}),
    })),
  });
  for (const [i, m] of created.entries()) {
    const moved = await h.call('PATCH', `/v1/clusters/${clusterId}/machines/${m.id}`, { body: { address: addresses[i] } });
    if (moved.status !== 200) throw new Error(`address ${machines[i]!.name}: ${moved.status}`);
  }
  return clusterId;
}

async function once(batchSize: number): Promise<{ wallMs: number; floorMs: number; state: string; cpuMs: number; simCpuMs: number }> {
  const h = await createHarness({
    patchDeps: (d) => {
      d.settings.upgrade = { pollMs: POLL_MS, callDeadlineMs: 5_000, rebootTimeoutMs: 60_000, gateTimeoutMs: 30_000 };
    },
  });
  const sims = startSimFleet();
  let clusterId: string;
  try {
    clusterId = await remoteUpgradeCluster(h, sims, fleet(CONTROL_PLANES, WORKERS));
  } catch (err) {
    await sims({ op: 'stop' });
    await h.close();
    throw err;
  }
  const worker = createWorker({ deps: h.deps, executors: Object.fromEntries([bind(upgradeJob, upgradeExecutor)]), workerId: 'bench', leaseMs: 30_000, concurrency: 1, pollMs: 20 });
  try {
    worker.start();
    const simCpu0 = await sims<number>({ op: 'cpu' });
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const res = await h.call('POST', `/v1/clusters/${clusterId}/upgrade`, { body: { talosVersion: 'v1.13.9', batchSize } });
    if (res.status !== 202) throw new Error(`upgrade: ${res.status} ${JSON.stringify(res.body)}`);
    const run = await runFinished(h, res.body.run.id);
    const wallMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const simCpuMs = (await sims<number>({ op: 'cpu' })) - simCpu0;
    if (run.state !== 'succeeded') throw new Error(`run ${run.state}: ${run.error}`);
    const floorMs = (CONTROL_PLANES + Math.ceil(WORKERS / batchSize)) * (REBOOT_MS + EVICTION_MS);
    return { wallMs, floorMs, state: run.state, cpuMs: (cpu.user + cpu.system) / 1000, simCpuMs };
  } finally {
    await worker.stop(0);
    await sims({ op: 'stop' });
    await h.close();
  }
}

console.log(`fleet: ${CONTROL_PLANES} control planes + ${WORKERS} workers, sim reboot ${REBOOT_MS} ms, eviction ${EVICTION_MS} ms, poll ${POLL_MS} ms; every node drained`);
for (const batch of [1, 5]) {
  const r = await once(batch);
  const steps = CONTROL_PLANES + Math.ceil(WORKERS / batch);
  console.log(
    `batch ${batch}: ${steps} steps, wall ${(r.wallMs / 1000).toFixed(1)} s, floor ${(r.floorMs / 1000).toFixed(1)} s, ratio ${(r.wallMs / r.floorMs).toFixed(2)}, ` +
      `overhead ${((r.wallMs - r.floorMs) / steps).toFixed(0)} ms/step; CPU product ${r.cpuMs.toFixed(0)} ms, sims ${r.simCpuMs.toFixed(0)} ms`,
  );
}
