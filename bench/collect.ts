/**
 * One collect pass over a simulated fleet: 500 Talos sims in 50 clusters (3 control planes and 7
 * workers each), every call answered after 20 ms, 5% of nodes black-holed, per-call deadline 2 s,
 * one Kubernetes API sim per cluster. The sims run in a child process (bench/collect-sims.ts), so
 * the CPU seconds and peak RSS printed are the collector's own.
 * Floor, measured in the same run: one node's full read (connect + every call) plus one deadline,
 * the least a pass with a dead node can take. Three passes: the first on cold channels, the
 * later ones on the channels the runner keeps between passes.
 * The Kubernetes client is loaded before pass 1 (its load time is printed apart): a runner loads
 * it once per process, and through tsx it would otherwise dominate pass 1.
 * Usage: tsx bench/collect.ts [nodes=500] [clusters=50] [concurrency=64]
 * COLLECT_PROFILE=<dir> writes a V8 CPU profile of each pass (pass1.cpuprofile...), the pass only;
 * with SIM_PASS_PROFILE=1 too, each sim child writes one of the same window (sims-<pid>-<time>.cpuprofile).
 */
import { runCollectPass } from '../runner/jobs/collect/pass.ts';
import { readNode } from '../runner/jobs/collect/talos-read.ts';
import { clusterAccess } from '../runner/jobs/cluster-access.ts';
import { createHarness } from '../test/support/harness.ts';
import { seedSimulatedFleet, startSimFleet } from './sim-fleet.ts';
import { loadKubernetesClient } from '../lib/kube/index.ts';
import { startProfile } from './cpu-profile.ts';
import { availableParallelism } from 'node:os';

const NODES = Number(process.argv[2] ?? 500);
const CLUSTERS = Number(process.argv[3] ?? 50);
const CONCURRENCY = Number(process.argv[4] ?? 64);
const LATENCY_MS = 20;
const DEAD_EVERY = 20; // 5%
const DEADLINE_MS = 2_000;
const perCluster = Math.ceil(NODES / CLUSTERS);

const sims = startSimFleet();

const tSetup = performance.now();
const h = await createHarness();
h.deps.settings.collectConcurrency = CONCURRENCY;
h.deps.settings.collectDeadlineMs = DEADLINE_MS;
const names = Array.from({ length: perCluster }, (_, i) => (i < 3 ? `cp${i + 1}` : `w${i - 2}`));
const { clusterIds, machines, addresses, kubeUrls: urls } = await seedSimulatedFleet(h, sims, { clusters: CLUSTERS, names, latencyMs: LATENCY_MS });
console.log(`setup: ${addresses.length} Talos sims, ${urls.length} Kubernetes sims (child process) in ${((performance.now() - tSetup) / 1000).toFixed(1)} s`);

// Floor: one healthy control plane read end to end on a fresh connection, plus one deadline.
const clusterRow = (await h.deps.db.query.clusters.findFirst({ where: (t, { eq }) => eq(t.id, clusterIds[0]!) }))!;
const access = await clusterAccess(h.deps, clusterRow);
let nodeMs = Infinity;
for (let i = 0; i < 3; i++) {
  const client = await access.talosClient(addresses[0]!);
  const t = performance.now();
  await readNode(client, 'controlplane', { deadlineMs: DEADLINE_MS });
  nodeMs = Math.min(nodeMs, performance.now() - t);
  client.close();
}
const floorMs = nodeMs + DEADLINE_MS;

// Once per runner process, not per pass: loading the Kubernetes client (here through tsx, from
// source) would otherwise land in pass 1 alone and hide what cold channels cost.
const tLoad = performance.now();
await loadKubernetesClient();
console.log(`kubernetes client load (once per process, before pass 1): ${(performance.now() - tLoad).toFixed(0)} ms`);

const dead = machines.map((_, i) => i).filter((i) => i % DEAD_EVERY === 7);
await sims({ op: 'blackhole', indices: dead });

// memoryUsage.rss() reads one figure; memoryUsage() walks the whole heap's spaces every 10 ms.
let peakRss = process.memoryUsage.rss();
const sampler = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage.rss());
}, 10);

// The first pass dials every node (cold channels, credentials minted); the later ones find the
// channels and credentials of the pass before, as a pass every minute does.
const PASSES = 3;
for (let pass = 1; pass <= PASSES; pass++) {
  // COLLECT_PROFILE=dir writes one .cpuprofile per pass (the pass alone, not the setup).
  const profDir = process.env['COLLECT_PROFILE'];
  const profiling = await startProfile(!!profDir);
  if (profiling && process.env['SIM_PASS_PROFILE']) await sims({ op: 'profile' });
  // The sims share the machine's cores: their CPU is printed so a slow pass on a busy box shows as such.
  const simCpu0 = await sims<number>({ op: 'cpu' });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const summary = await runCollectPass(h.deps);
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  if (profiling) {
    await profiling.stop(`${profDir}/pass${pass}.cpuprofile`);
    if (process.env['SIM_PASS_PROFILE']) await sims({ op: 'profile', dir: profDir! });
  }
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const simCpuMs = (await sims<number>({ op: 'cpu' })) - simCpu0;
  if (pass === 1) {
    console.log(`pass: ${summary.machines} nodes in ${summary.clusters} clusters, ${dead.length} black-holed, latency ${LATENCY_MS} ms, deadline ${DEADLINE_MS} ms, concurrency ${CONCURRENCY}`);
    console.log(`states: ${JSON.stringify(summary.states)}, answered ${summary.reached}`);
    const errors = await h.deps.database.client.execute('SELECT last_error, count(*) AS n FROM machine_health WHERE last_error IS NOT NULL GROUP BY 1 ORDER BY 2 DESC LIMIT 3');
    for (const r of errors.rows) console.log(`  ${String(r['n'])} × ${String(r['last_error']).replace(/on \S+:\d+/, 'on <node>')}`);
  }
  const label = pass === 1 ? 'pass 1 (cold channels)' : `pass ${pass} (warm channels)`;
  console.log(
    `${label}: wall ${wallMs.toFixed(0)} ms; floor ${floorMs.toFixed(0)} ms (one node ${nodeMs.toFixed(1)} ms + one deadline); ratio ${(wallMs / floorMs).toFixed(2)}; ` +
      `collector cpu ${(cpuMs / 1000).toFixed(2)} s (user ${(cpu.user / 1e6).toFixed(2)}, system ${(cpu.system / 1e6).toFixed(2)}), ${(cpuMs / summary.machines).toFixed(2)} ms per node; sims cpu ${(simCpuMs / 1000).toFixed(2)} s; collector + sims busy ${((cpuMs + simCpuMs) / wallMs).toFixed(2)} cores of the wall time`,
  );
  // Collector and sims share this machine's cores: their CPU spread over every core is the
  // shortest pass this machine allows, however well the pass overlaps its waits.
  const cpuFloorMs = (cpuMs + simCpuMs) / availableParallelism();
  console.log(`  CPU floor here (${availableParallelism()} cores): ${cpuFloorMs.toFixed(0)} ms, so this pass's ratio cannot go below ${(Math.max(cpuFloorMs, floorMs) / floorMs).toFixed(2)} on this machine`);
}
clearInterval(sampler);
peakRss = Math.max(peakRss, process.memoryUsage.rss());
console.log(`collector peak rss: ${(peakRss / 1024 / 1024).toFixed(0)} MiB`);

await sims({ op: 'stop' });
await h.close();
