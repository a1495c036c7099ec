// RezusCloud provision (API → queue → worker → tofu against the built-in http state backend →
// addresses stored → run succeeded) of modules/local with 20 machines, against
// `terraform init && terraform apply` run directly on the same module with a local state file.
// "cold": the first run (a fresh directory for terraform, a new cluster for RezusCloud); "warm":
// the second one after adding a machine (terraform re-runs init && apply in its directory,
// RezusCloud re-uses the cluster's kept init). Several rounds, alternating which side goes first,
// after one warm-up round; prints each round, the medians and the median of the per-round ratios
// (paired, so load drifting on a shared machine hits both sides of a ratio alike).
// REZUS_BENCH_ROUNDS sets the number of rounds (default 11: single rounds swing ±30% with the disk here).
import { execa } from 'execa';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { executors, onRunsInterrupted } from '../runner/jobs/registry.ts';
import { renderMachineConfig } from '../lib/talos/config.ts';
import { resolveTofuBinary } from '../lib/tofu/index.ts';
import { MODULES_ROOT } from '../runner/jobs/provision/root-module.ts';
import { createWorker } from '../runner/worker.ts';
import { createHarness } from '../test/support/harness.ts';
import { listen } from '../test/support/serve.ts';
import { median } from './median.ts';

const MACHINES = 20;
const ROUNDS = Math.max(1, Math.min(50, Number(process.env.REZUS_BENCH_ROUNDS ?? 11) || 11));
const names = Array.from({ length: MACHINES + 1 }, (_, i) => `m${String(i).padStart(2, '0')}`);
const role = (i: number) => (i < 3 ? 'controlplane' : 'worker');

type Pair = { cold: number; warm: number };

const bin = await resolveTofuBinary({ env: { PATH: process.env.PATH ?? '' } });
const h = await createHarness();
const server = await listen(h);
const worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'bench', leaseMs: 30_000, concurrency: 1, pollMs: 500, onInterrupted: (ids) => onRunsInterrupted(h.deps, ids) });
worker.start();
const secrets = await h.deps.newClusterSecrets();
const tenant = (await h.call('POST', '/v1/tenants', { body: { name: 'bench' } })).body.id as string;

async function direct(): Promise<Pair> {
  const dir = await mkdtemp(join(tmpdir(), 'rezus-bench-direct-'));
  try {
    await cp(join(MODULES_ROOT, 'local'), dir, { recursive: true });
    const vars = (count: number) => ({
      cluster_name: 'bench',
      machines: Object.fromEntries(
        names.slice(0, count).map((n, i) => [
          n,
          { role: role(i), user_data: renderMachineConfig({ secrets, clusterName: 'bench', endpoint: 'https://[2001:db8::1]:6443', role: role(i), hostname: n, installDisk: '/dev/sda' }) },
        ]),
      ),
    });
    const env = { PATH: process.env.PATH ?? '', HOME: dir, TF_IN_AUTOMATION: '1', CHECKPOINT_DISABLE: '1' };
    const initApply = async (count: number): Promise<number> => {
      await writeFile(join(dir, 'vars.tfvars.json'), JSON.stringify(vars(count)));
      const t0 = performance.now();
      await execa(bin.path, ['init', '-input=false', '-no-color'], { cwd: dir, env, extendEnv: false });
      await execa(bin.path, ['apply', '-auto-approve', '-input=false', '-no-color', '-var-file=vars.tfvars.json'], { cwd: dir, env, extendEnv: false });
      return performance.now() - t0;
    };
    return { cold: await initApply(MACHINES), warm: await initApply(MACHINES + 1) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Until the run is over, woken by its events (as an API follower is) with a poll as fallback. */
async function settled(runId: string): Promise<void> {
  for (;;) {
    const r = await h.deps.jobs.get(runId);
    if (r && !['queued', 'running'].includes(r.state)) {
      if (r.state !== 'succeeded') throw new Error(`provision ${r.state}: ${r.error}`);
      return;
    }
    await new Promise<void>((resolve) => {
      const off = h.deps.bus.subscribe(runId, done);
      const t = setTimeout(done, 50);
      function done() {
        off();
        clearTimeout(t);
        resolve();
      }
    });
  }
}

let clusters = 0;
async function viaRezus(): Promise<Pair> {
  const c = await h.call('POST', '/v1/clusters', { body: { tenant, name: `bench-${++clusters}`, endpoint: 'https://[2001:db8::1]:6443' } });
  const addMachine = (i: number) => h.call('POST', `/v1/clusters/${c.body.id}/machines`, { body: { name: names[i], role: role(i), provider: 'local' } });
  for (let i = 0; i < MACHINES; i++) await addMachine(i);
  const provision = async (): Promise<number> => {
    const t0 = performance.now();
    const res = await h.call('POST', `/v1/clusters/${c.body.id}/provision`, { body: { mode: 'apply' } });
    if (res.status !== 202 && res.status !== 200 && res.status !== 201) throw new Error(`provision: ${res.status} ${JSON.stringify(res.body)}`);
    await settled(res.body.run.id);
    return performance.now() - t0;
  };
  const cold = await provision();
  await addMachine(MACHINES);
  return { cold, warm: await provision() };
}

const ms = (x: number) => `${x.toFixed(0)} ms`;

try {
  // Warm-up: OS caches, terraform itself, the JIT on both paths.
  await direct();
  await viaRezus();
  const rows: { direct: Pair; rezus: Pair }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    let d: Pair, z: Pair;
    if (r % 2 === 0) {
      d = await direct();
      z = await viaRezus();
    } else {
      z = await viaRezus();
      d = await direct();
    }
    rows.push({ direct: d, rezus: z });
    console.log(
      `round ${r + 1}: cold direct ${ms(d.cold)}, RezusCloud ${ms(z.cold)} (${(z.cold / d.cold).toFixed(2)}x); warm direct ${ms(d.warm)}, RezusCloud ${ms(z.warm)} (${(z.warm / d.warm).toFixed(2)}x)`,
    );
  }
  console.log(`machines: ${MACHINES}, then one more; ${ROUNDS} rounds; terraform ${bin.version}`);
  for (const kind of ['cold', 'warm'] as const) {
    const dm = median(rows.map((x) => x.direct[kind]));
    const zm = median(rows.map((x) => x.rezus[kind]));
    const paired = median(rows.map((x) => x.rezus[kind] / x.direct[kind]));
    const what =
      kind === 'cold'
        ? 'first run: terraform init + apply directly (local state, fresh dir) vs RezusCloud provision of a new cluster (API, queue, http state backend, events)'
        : 'second run (+1 machine): terraform init + apply directly in its dir vs RezusCloud provision (kept init)';
    console.log(`${what}: median ${ms(dm)} vs ${ms(zm)}; ratio of medians ${(zm / dm).toFixed(2)}x, median per-round ratio ${paired.toFixed(2)}x`);
  }
} finally {
  await worker.stop(0);
  await server.close();
  await h.close();
}
