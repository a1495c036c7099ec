/**
 * Rolling-upgrade wall time against its floor. 3 control planes + 30 workers, every sim reboot
 * takes 2 s, and every node is drained first: two pods per node, each taking 300 ms to terminate
 * once evicted (simulated eviction latency). Batch sizes 1 and 5. Floor: one drain and one reboot
 * per step (3 CP steps + ceil(30/batch) worker steps) × (0.3 s + 2 s). Everything above it is
 * RezusCloud's own cost: API calls, evictions, polls, health gates.
 * Usage: npx tsx bench/upgrade.ts
 */
import { upgradeJob } from '../functions/upgrade/job.ts';
import { upgradeExecutor } from '../runner/jobs/upgrade/executor.ts';
import { bind } from '../runner/jobs/registry.ts';
import { createWorker } from '../runner/worker.ts';
import { createHarness } from '../test/support/harness.ts';
import { fleet, startUpgradeCluster } from '../test/support/upgrade-cluster.ts';

const CONTROL_PLANES = 3;
const WORKERS = 30;
const REBOOT_MS = 2_000;
const POLL_MS = 200;
const EVICTION_MS = 300;

async function once(batchSize: number): Promise<{ wallMs: number; floorMs: number; state: string }> {
  const h = await createHarness({
    patchDeps: (d) => {
      d.settings.upgrade = { pollMs: POLL_MS, callDeadlineMs: 5_000, rebootTimeoutMs: 60_000, gateTimeoutMs: 30_000 };
    },
  });
  const cluster = await startUpgradeCluster(h, { talosVersion: 'v1.13.2', machines: fleet(CONTROL_PLANES, WORKERS), rebootMs: REBOOT_MS });
  cluster.kube.setEvictionLatency(EVICTION_MS);
  for (const name of cluster.sims.keys()) {
    cluster.kube.setPod({ namespace: 'apps', name: `web-${name}`, nodeName: name, labels: { app: 'web' }, ownerKind: 'ReplicaSet' });
    cluster.kube.setPod({ namespace: 'apps', name: `cache-${name}`, nodeName: name, ownerKind: 'StatefulSet', emptyDir: true });
    cluster.kube.setPod({ namespace: 'kube-system', name: `proxy-${name}`, nodeName: name, ownerKind: 'DaemonSet' });
  }
  const worker = createWorker({ deps: h.deps, executors: Object.fromEntries([bind(upgradeJob, upgradeExecutor)]), workerId: 'bench', leaseMs: 30_000, concurrency: 1, pollMs: 20 });
  try {
    worker.start();
    const t0 = performance.now();
    const res = await h.call('POST', `/v1/clusters/${cluster.clusterId}/upgrade`, { body: { talosVersion: 'v1.13.9', batchSize } });
    if (res.status !== 202) throw new Error(`upgrade: ${res.status} ${JSON.stringify(res.body)}`);
    let run = await h.deps.jobs.get(res.body.run.id);
    while (run && (run.state === 'queued' || run.state === 'running')) {
      await new Promise((r) => setTimeout(r, 20));
      run = await h.deps.jobs.get(res.body.run.id);
    }
    const wallMs = performance.now() - t0;
    if (run?.state !== 'succeeded') throw new Error(`run ${run?.state}: ${run?.error}`);
    const floorMs = (CONTROL_PLANES + Math.ceil(WORKERS / batchSize)) * (REBOOT_MS + EVICTION_MS);
    return { wallMs, floorMs, state: run.state };
  } finally {
    await worker.stop(0);
    await cluster.stop();
    await h.close();
  }
}

console.log(`fleet: ${CONTROL_PLANES} control planes + ${WORKERS} workers, sim reboot ${REBOOT_MS} ms, eviction ${EVICTION_MS} ms, poll ${POLL_MS} ms; every node drained`);
for (const batch of [1, 5]) {
  const r = await once(batch);
  const steps = CONTROL_PLANES + Math.ceil(WORKERS / batch);
  console.log(
    `batch ${batch}: ${steps} steps, wall ${(r.wallMs / 1000).toFixed(1)} s, floor ${(r.floorMs / 1000).toFixed(1)} s, ratio ${(r.wallMs / r.floorMs).toFixed(2)}, ` +
      `overhead ${((r.wallMs - r.floorMs) / steps).toFixed(0)} ms/step`,
  );
}
