/**
 * The production runner as `npm start` runs it (the `start` script of package.json, without npm):
 * process start → first `/readyz` 200, idle RSS, and RSS after ten collect passes over 30 simulated
 * nodes (3 clusters of 3 control planes + 7 workers, sims in a child process).
 * Floor, measured in the same run: a bare node:http server (bench/runner-floor.mjs) started with
 * the same node and flags. Targets: ready ≤ 2× the floor, idle RSS ≤ 100 MB, after passes ≤ 160 MB.
 * The runner kept for the passes also gets bench/runner-heap-probe.mjs (and --expose-gc), for what
 * it holds after a full GC: RSS after the passes swings with V8's garbage high-water.
 * Usage: tsx bench/runner.ts [starts=5]
 */
import { execa, type ResultPromise } from 'execa';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createHarness } from '../test/support/harness.ts';
import { seedSimulatedFleet, startSimFleet } from './sim-fleet.ts';
import { median } from './median.ts';

const STARTS = Number(process.argv[2] ?? 5);
const CLUSTERS = 3;
const NAMES = ['cp1', 'cp2', 'cp3', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7'];
const PASSES = 10;
const LATENCY_MS = 5;
const SETTLE_MS = 2_000;
const ROOT = join(import.meta.dirname, '..');
const MiB = 1024 * 1024;

// Exactly what `npm start` runs, so flags added there are measured here too.
const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } };
const [bin, ...startArgs] = pkg.scripts.start.split(/\s+/);
if (bin !== 'node') throw new Error(`bench/runner expects the start script to run node, found: ${pkg.scripts.start}`);
const nodeFlags = startArgs.filter((a) => a.startsWith('--'));

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** CPU time (user + system) a process has used so far: less sensitive than wall time to other load on the machine. */
async function cpuMsOf(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  // utime and stime (fields 14 and 15 of stat), in clock ticks of 10 ms on Linux.
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/** Spawns, then polls /readyz every 5 ms (bounded: 60 s) and returns the time to the first 200. */
async function startAndWait(args: string[], env: Record<string, string>): Promise<{ child: ResultPromise; readyMs: number; cpuMs: number; url: string }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const t0 = performance.now();
  const child = execa(process.execPath, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', REZUS_PORT: String(port), REZUS_HOST: '127.0.0.1', ...env },
    extendEnv: false,
    reject: false,
    stdout: 'ignore',
    stderr: 'pipe',
  });
  while (performance.now() - t0 < 60_000) {
    if (child.exitCode !== null) throw new Error(`exited early: ${(await child).stderr}`);
    const ok = await fetch(`${url}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) {
      const readyMs = performance.now() - t0;
      return { child, readyMs, cpuMs: await cpuMsOf(child.pid!), url };
    }
    await sleep(5);
  }
  child.kill('SIGKILL');
  throw new Error('not ready within 60 s');
}

async function stop(child: ResultPromise) {
  child.kill('SIGTERM');
  await child;
}

// The fleet is seeded in the runner's own database file before it starts (its secrets are
// needed to run sims its clients trust), then the harness lets go of the file.
const sims = startSimFleet();
const h = await createHarness();
const { machines } = await seedSimulatedFleet(h, sims, { clusters: CLUSTERS, names: NAMES, latencyMs: LATENCY_MS });
h.deps.database.close();

const runnerEnv = {
  REZUS_DATA_DIR: h.dir,
  REZUS_MASTER_KEY: h.masterKey.toString('hex'),
  REZUS_ADMIN_TOKEN: h.adminToken,
  // Passes are started by the bench, never by the cron, so each one is counted.
  REZUS_COLLECT_CRON: '0 0 1 1 *',
  REZUS_LOG_LEVEL: 'warn',
};

// dist/ is built (if stale) outside the timed starts: a build is not part of a start.
await execa(process.execPath, [join(ROOT, 'scripts', 'build.mjs'), '--if-stale'], { stdio: 'inherit' });

const floorMs: number[] = [];
const runnerMs: number[] = [];
const floorCpu: number[] = [];
const runnerCpu: number[] = [];
let floorRss = 0;
for (let i = 0; i < STARTS; i++) {
  // Alternate, so drift in machine load hits both alike.
  const f = await startAndWait([...nodeFlags, join(ROOT, 'bench', 'runner-floor.mjs')], {});
  floorMs.push(f.readyMs);
  floorCpu.push(f.cpuMs);
  if (i === STARTS - 1) {
    await sleep(SETTLE_MS);
    floorRss = await rssOf(f.child.pid!);
  }
  await stop(f.child);
  const r = await startAndWait(startArgs.map((a) => (a.startsWith('--') ? a : join(ROOT, a))), runnerEnv);
  runnerMs.push(r.readyMs);
  runnerCpu.push(r.cpuMs);
  await stop(r.child);
}

// The last runner stays up for the idle reading and the passes, with the heap probe preloaded.
const heapOut = join(h.dir, 'heap-after-gc.json');
const run = await startAndWait(
  ['--expose-gc', `--import=${pathToFileURL(join(ROOT, 'bench', 'runner-heap-probe.mjs')).href}`, ...startArgs.map((a) => (a.startsWith('--') ? a : join(ROOT, a)))],
  { ...runnerEnv, REZUS_BENCH_HEAP_OUT: heapOut },
);
await sleep(SETTLE_MS);
const runnerRss = await rssOf(run.child.pid!);
const auth = { authorization: `Bearer ${h.adminToken}`, 'content-type': 'application/json' };
let peakRss = runnerRss;
const passMs: number[] = [];
let answered = 0;
for (let p = 0; p < PASSES; p++) {
  const t = performance.now();
  const res = await fetch(`${run.url}/v1/collect`, { method: 'POST', headers: auth, body: '{}' });
  if (res.status !== 202) throw new Error(`POST /v1/collect: ${res.status} ${await res.text()}`);
  const { run: queued } = (await res.json()) as { run: { id: string } };
  for (;;) {
    if (performance.now() - t > 60_000) throw new Error('a pass took over 60 s');
    const r = (await (await fetch(`${run.url}/v1/runs/${queued.id}`, { headers: auth })).json()) as { state: string; result?: { reached?: number } };
    peakRss = Math.max(peakRss, await rssOf(run.child.pid!));
    if (r.state === 'succeeded') {
      answered = r.result?.reached ?? 0;
      break;
    }
    if (['failed', 'canceled', 'interrupted'].includes(r.state)) throw new Error(`pass ${p} ended ${r.state}`);
    await sleep(20);
  }
  passMs.push(performance.now() - t);
}
await sleep(SETTLE_MS);
const afterRss = await rssOf(run.child.pid!);
process.kill(run.child.pid!, 'SIGUSR2');
let heap: { heapUsed: number; external: number; scriptSource: number; heapTotalBefore: number } | undefined;
for (let i = 0; i < 100 && !heap; i++) {
  await sleep(50);
  heap = await readFile(heapOut, 'utf8').then((t) => JSON.parse(t) as typeof heap, () => undefined);
}
const { stderr } = await (async () => {
  await stop(run.child);
  return run.child;
})();

const fmt = (b: number) => `${(b / MiB).toFixed(0)} MiB`;
const mib1 = (b: number): string => `${(b / MiB).toFixed(1)} MiB`;
const ready = median(runnerMs);
const floor = median(floorMs);
console.log(`node ${process.version}, flags: ${nodeFlags.join(' ') || '(none)'}; ${STARTS} starts each, medians`);
console.log(`ready: runner ${ready.toFixed(0)} ms vs bare http server ${floor.toFixed(0)} ms; ratio ${(ready / floor).toFixed(2)} (target ≤ 2)`);
console.log(`cpu to ready: runner ${median(runnerCpu)} ms vs bare http server ${median(floorCpu)} ms; ratio ${(median(runnerCpu) / median(floorCpu)).toFixed(2)} (wall time above varies with other load on the machine; this does less)`);
console.log(`idle rss: runner ${fmt(runnerRss)} vs bare server ${fmt(floorRss)}; ratio ${(runnerRss / floorRss).toFixed(2)} (target ≤ 100 MB)`);
console.log(`after ${PASSES} collect passes over ${machines.length} nodes (${answered} answered in the last, median pass ${median(passMs).toFixed(0)} ms): rss ${fmt(afterRss)}, peak ${fmt(peakRss)}; ${(afterRss / runnerRss).toFixed(2)}× idle (target ≤ 160 MB)`);
console.log(
  heap
    ? `held after a full GC (steadier than rss for comparing changes): heap ${mib1(heap.heapUsed)}, external ${mib1(heap.external)}, script source ${mib1(heap.scriptSource)}; V8 heap committed before that GC ${mib1(heap.heapTotalBefore)}`
    : 'held after a full GC: no reading (the heap probe did not answer)',
);
const nonJson = String(stderr)
  .split('\n')
  .filter((l) => l.trim() !== '' && !l.startsWith('{'));
console.log(`stderr lines that are not JSON: ${nonJson.length}${nonJson.length ? `\n  ${nonJson.slice(0, 5).join('\n  ')}` : ''}`);

await sims({ op: 'stop' });
await h.close();
