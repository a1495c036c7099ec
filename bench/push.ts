/**
 * Whole-cluster pushes (POST /v1/clusters/:id/push-config) of many bare-metal nodes in
 * maintenance mode, through the real HTTP API and a real worker, against sim nodes with added
 * latency on every call: PUSH_ROUNDS (default 8) of them, each on a fresh rack.
 *
 * Baseline, same run: each node pushed alone (single-machine route, its own cluster), one after
 * the other, on a twin fleet; the slowest of those is the floor a fully parallel push can reach.
 * Usage: npx tsx bench/push.ts [nodes] [latencyMs]   (POLL_MS: readiness poll interval, default 100)
 * PUSH_TIMELINE=1 prints when each kind of event was written, for the last cluster push and the slowest single.
 * PUSH_PROFILE=<file> writes a V8 CPU profile of the last cluster push alone; with SIM_PUSH_PROFILE=<dir>
 * too, each sim child writes one of the same window (sims-<pid>-<time>.cpuprofile).
 */
import { startProfile } from './cpu-profile.ts';
import { availableParallelism } from 'node:os';
import { createWorker } from '../runner/worker.ts';
import { executors } from '../runner/jobs/registry.ts';
import { runFinished } from './run-wait.ts';
import { startSimFleet } from './sim-fleet.ts';
import { median } from './median.ts';
import { createHarness, seedCluster, type Harness } from '../test/support/harness.ts';

const count = Number(process.argv[2] ?? 50);
const latencyMs = Number(process.argv[3] ?? 20);

const h: Harness = await createHarness({
  patchDeps: (d) => {
    d.settings.pushConfig = { callDeadlineMs: 30_000, readyTimeoutMs: 60_000, pollMs: Number(process.env.POLL_MS ?? 100) };
  },
});
const worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'bench', leaseMs: 30_000, concurrency: 2, pollMs: 20 });
worker.start();

// The sims live in child processes (spread over up to four), as real nodes would be elsewhere:
// the wall time and CPU measured here are the product's (API, worker, SQLite, TLS client), not
// the simulator's, which is reported apart.
const sims = startSimFleet();

interface Target {
  sim: { address: string; fingerprint: string };
  clusterId: string;
  machineId: string;
}

async function fleet(prefix: string): Promise<Target[]> {
  const targets: Target[] = [];
  const started = await sims<Target['sim'][]>({ op: 'maintenance', count, latencyMs, rebootMs: 20 });
  for (const [i, sim] of started.entries()) {
    const { clusterId } = await seedCluster(h, `${prefix}${i}`);
    const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'metal', address: sim.address } });
    targets.push({ sim, clusterId, machineId: m.body.id });
  }
  return targets;
}

async function start(t: Target): Promise<string> {
  const res = await h.call('POST', `/v1/clusters/${t.clusterId}/machines/${t.machineId}/push-config`, {
    body: { insecure: true, certFingerprint: t.sim.fingerprint },
  });
  if (res.status !== 202) throw new Error(`push refused: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.run.id;
}

/** The run's end (bench/run-wait.ts); anything but success stops the bench. */
async function finished(runId: string): Promise<void> {
  const run = await runFinished(h, runId);
  if (run.state !== 'succeeded') throw new Error(`run ${runId} ${run.state}: ${run.error}`);
}

async function timedPush(t: Target): Promise<{ ms: number; runId: string }> {
  const t0 = performance.now();
  const runId = await start(t);
  await finished(runId);
  return { ms: performance.now() - t0, runId };
}

/** PUSH_TIMELINE=1: when each event type of a run was written, ms from its first event. */
async function printTimeline(title: string, runId: string): Promise<void> {
  const rows = (await h.deps.database.client.execute({ sql: 'select at, type from run_events where run_id = ? order by seq', args: [runId] })).rows;
  const start = Number(rows[0]!.at);
  const by = new Map<string, number[]>();
  for (const row of rows) {
    const k = String(row.type);
    const a = by.get(k) ?? [];
    a.push(Number(row.at) - start);
    by.set(k, a);
  }
  console.log(`timeline of ${title} (ms from its first event)`);
  for (const [k, a] of by) console.log(' ', k.padEnd(20), 'n', a.length, 'min', Math.min(...a), 'p50', median(a), 'max', Math.max(...a));
}

/** The twin fleet as the machines of one cluster. */
async function rackCluster(name: string, size: number): Promise<{ clusterId: string; machines: Array<{ id: string; certFingerprint: string }> }> {
  const started = await sims<Target['sim'][]>({ op: 'maintenance', count: size, latencyMs, rebootMs: 20 });
  const { clusterId } = await seedCluster(h, name);
  const machines: Array<{ id: string; certFingerprint: string }> = [];
  for (const [i, sim] of started.entries()) {
    const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: `cp${String(i).padStart(2, '0')}`, role: 'controlplane', provider: 'metal', address: sim.address } });
    machines.push({ id: m.body.id, certFingerprint: sim.fingerprint });
  }
  return { clusterId, machines };
}

async function clusterPush(clusterId: string, machines: Array<{ id: string; certFingerprint: string }>): Promise<string> {
  const res = await h.call('POST', `/v1/clusters/${clusterId}/push-config`, { body: { machines, insecure: true, concurrency: machines.length } });
  if (res.status !== 202) throw new Error(`cluster push refused: ${res.status} ${JSON.stringify(res.body)}`);
  await finished(res.body.run.id);
  return res.body.run.id;
}

// Each measured cluster push gets its own rack: a pushed node is configured and cannot be pushed
// in maintenance mode again. One push is one sample of a noisy VM, so the bench takes several.
const rounds = Math.max(1, Number(process.env['PUSH_ROUNDS'] ?? 8));
const solo = await fleet('solo');
const racks = [];
for (let r = 0; r < rounds; r++) racks.push(await rackCluster(`rack${r}`, count));
await timedPush(solo.pop()!); // warm up proto loading, TLS and the admin certificate
// The cluster push is warmed up the same way, at full size: its first run in a process pays its
// own first-use costs (its executor module, its request schema, JIT of the paths that only 50
// nodes at once take) in the product and in the sim children alike, and took 1.1–1.4× the wall
// time of the ones after it. Not part of what is compared, as the single push's warm-up is not.
const spare = await rackCluster('spare', count);
const warm0 = performance.now();
await clusterPush(spare.clusterId, spare.machines);
const warmupMs = performance.now() - warm0;
const singleRuns = [];
for (const t of solo) singleRuns.push(await timedPush(t));
const singles = singleRuns.map((s) => s.ms);

interface Round {
  wall: number;
  /** The whole product process (every thread) and its main thread alone, ms of CPU. */
  productCpuMs: number;
  mainThreadCpuMs: number;
  simCpuMs: number;
}
const cpuMs = (c: NodeJS.CpuUsage) => (c.user + c.system) / 1000;
const measured: Round[] = [];
const profFile = process.env['PUSH_PROFILE'];
const simProfDir = process.env['SIM_PUSH_PROFILE'];
for (const [r, rack] of racks.entries()) {
  // Each sim child collects the garbage of the setup (hundreds of sims, the pushes before) now: an
  // old-space collection in a child stalls all its nodes at once, which nodes on their own
  // machines never do.
  await sims({ op: 'settle' });
  // The last round alone (the warmest) is profiled and its timeline printed.
  const last = r === racks.length - 1;
  const profiling = last ? await startProfile(!!profFile) : undefined;
  if (profiling && simProfDir) await sims({ op: 'profile' });
  const simCpu0 = await sims<number>({ op: 'cpu' });
  const cpu0 = process.cpuUsage();
  const main0 = process.threadCpuUsage();
  const t0 = performance.now();
  const runId = await clusterPush(rack.clusterId, rack.machines);
  const wall = performance.now() - t0;
  measured.push({ wall, productCpuMs: cpuMs(process.cpuUsage(cpu0)), mainThreadCpuMs: cpuMs(process.threadCpuUsage(main0)), simCpuMs: (await sims<number>({ op: 'cpu' })) - simCpu0 });
  if (profiling && profFile) await profiling.stop(profFile);
  if (profiling && simProfDir) await sims({ op: 'profile', dir: simProfDir });
  if (last && process.env['PUSH_TIMELINE']) await printTimeline(`cluster push ${r + 1}`, runId);
}
if (process.env['PUSH_TIMELINE']) {
  const slowest = singleRuns.reduce((a, b) => (b.ms > a.ms ? b : a));
  await printTimeline('the slowest single push', slowest.runId);
}
await worker.stop(5_000);
await sims({ op: 'stop' });
await h.close();

const slowestSingle = Math.max(...singles);
const cores = availableParallelism();
console.log(`nodes: ${count}, added latency: ${latencyMs} ms per call, via HTTP API + worker`);
console.log(`single pushes, one at a time (${singles.length}): median ${median(singles).toFixed(0)} ms, slowest ${slowestSingle.toFixed(0)} ms`);
console.log(`warm-up cluster push of ${count} machines (not measured): wall ${warmupMs.toFixed(0)} ms, ratio ${(warmupMs / slowestSingle).toFixed(2)}`);
for (const [r, m] of measured.entries()) {
  // Product and sims share this machine's cores: their CPU time spread over every core is the
  // shortest wall time the cluster push can have here, however parallel it is. The product's
  // main thread cannot share its work with another core at all.
  const cpuFloor = (m.productCpuMs + m.simCpuMs) / cores;
  console.log(
    `cluster push ${r + 1} of ${count} machines: wall ${m.wall.toFixed(0)} ms, ratio ${(m.wall / slowestSingle).toFixed(2)}; ` +
      `CPU product ${m.productCpuMs.toFixed(0)} ms (${(m.productCpuMs / count).toFixed(1)} ms/node; main thread ${m.mainThreadCpuMs.toFixed(0)} ms = ${(m.mainThreadCpuMs / slowestSingle).toFixed(2)}x the single), ` +
      `sims ${m.simCpuMs.toFixed(0)} ms (${(m.simCpuMs / count).toFixed(1)} ms/node); floor on ${cores} cores ${(cpuFloor / slowestSingle).toFixed(2)}x`,
  );
}
const ratios = measured.map((m) => m.wall / slowestSingle);
console.log(`ratio cluster push / slowest single push: median ${median(ratios).toFixed(2)}, best ${Math.min(...ratios).toFixed(2)} over ${measured.length} (1.00 = fully parallel; target <= 1.5)`);
