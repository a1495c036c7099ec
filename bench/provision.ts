// RezusCloud provision (API → queue → worker → tofu against the built-in state backend) of
// modules/local with 20 machines, against `terraform init && terraform apply` run directly on
// the same module with a local state file. Then a second run of each after adding a machine:
// the direct one re-runs init && apply in its directory, RezusCloud re-uses its initialised
// work dir. Prints the wall times and the overhead ratios of both.
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

const MACHINES = 20;
const names = Array.from({ length: MACHINES + 1 }, (_, i) => `m${String(i).padStart(2, '0')}`);

async function direct(): Promise<[number, number]> {
  const bin = await resolveTofuBinary({ env: { PATH: process.env.PATH ?? '' } });
  const dir = await mkdtemp(join(tmpdir(), 'rezus-bench-direct-'));
  try {
    await cp(join(MODULES_ROOT, 'local'), dir, { recursive: true });
    const h = await createHarness();
    const secrets = await h.deps.newClusterSecrets();
    await h.close();
    const vars = (count: number) => ({
      cluster_name: 'bench',
      machines: Object.fromEntries(
        names.slice(0, count).map((n, i) => [
          n,
          {
            role: i < 3 ? 'controlplane' : 'worker',
            user_data: renderMachineConfig({ secrets, clusterName: 'bench', endpoint: 'https://[2001:db8::1]:6443', role: i < 3 ? 'controlplane' : 'worker', hostname: n, installDisk: '/dev/sda' }),
          },
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
    return [await initApply(MACHINES), await initApply(MACHINES + 1)];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function viaRezus(): Promise<[number, number]> {
  const h = await createHarness();
  const server = await listen(h);
  const worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'bench', leaseMs: 30_000, concurrency: 1, pollMs: 20, onInterrupted: (ids) => onRunsInterrupted(h.deps, ids) });
  worker.start();
  try {
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'bench' } });
    const c = await h.call('POST', '/v1/clusters', { body: { tenant: t.body.id, name: 'bench', endpoint: 'https://[2001:db8::1]:6443' } });
    const addMachine = (i: number) => h.call('POST', `/v1/clusters/${c.body.id}/machines`, { body: { name: names[i], role: i < 3 ? 'controlplane' : 'worker', provider: 'local' } });
    for (let i = 0; i < MACHINES; i++) await addMachine(i);
    const provision = async (): Promise<number> => {
      const t0 = performance.now();
      const run = (await h.call('POST', `/v1/clusters/${c.body.id}/provision`, { body: { mode: 'apply' } })).body.run;
      for (;;) {
        const r = await h.deps.jobs.get(run.id);
        if (r && !['queued', 'running'].includes(r.state)) {
          if (r.state !== 'succeeded') throw new Error(`provision ${r.state}: ${r.error}`);
          break;
        }
        await new Promise((res) => setTimeout(res, 10));
      }
      return performance.now() - t0;
    };
    const first = await provision();
    await addMachine(MACHINES);
    return [first, await provision()];
  } finally {
    await worker.stop(0);
    await server.close();
    await h.close();
  }
}

await direct(); // warm the OS caches and terraform itself
const [baseline, baseline2] = await direct();
const [rezus, rezus2] = await viaRezus();
console.log(`machines: ${MACHINES}, then one more`);
console.log(`first run: terraform init + apply directly (local state) ${baseline.toFixed(0)} ms; RezusCloud provision (API, queue, http state backend, events) ${rezus.toFixed(0)} ms; ratio ${(rezus / baseline).toFixed(2)}x`);
console.log(`second run (+1 machine): terraform init + apply directly ${baseline2.toFixed(0)} ms; RezusCloud provision (initialised work dir kept) ${rezus2.toFixed(0)} ms; ratio ${(rezus2 / baseline2).toFixed(2)}x`);
