// RezusCloud provision (API → queue → worker → tofu against the built-in state backend) of
// modules/local with 20 machines, against `terraform init && terraform apply` run directly on
// the same module with a local state file. Prints both wall times and the overhead ratio.
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
const names = Array.from({ length: MACHINES }, (_, i) => `m${String(i).padStart(2, '0')}`);

async function direct(): Promise<number> {
  const bin = await resolveTofuBinary({ env: { PATH: process.env.PATH ?? '' } });
  const dir = await mkdtemp(join(tmpdir(), 'rezus-bench-direct-'));
  try {
    await cp(join(MODULES_ROOT, 'local'), dir, { recursive: true });
    const h = await createHarness();
    const secrets = await h.deps.newClusterSecrets();
    await h.close();
    const machines = Object.fromEntries(
      names.map((n, i) => [
        n,
        {
          role: i < 3 ? 'controlplane' : 'worker',
          user_data: renderMachineConfig({ secrets, clusterName: 'bench', endpoint: 'https://[2001:db8::1]:6443', role: i < 3 ? 'controlplane' : 'worker', hostname: n, installDisk: '/dev/sda' }),
        },
      ]),
    );
    await writeFile(join(dir, 'vars.tfvars.json'), JSON.stringify({ cluster_name: 'bench', machines }));
    const env = { PATH: process.env.PATH ?? '', HOME: dir, TF_IN_AUTOMATION: '1', CHECKPOINT_DISABLE: '1' };
    const t0 = performance.now();
    await execa(bin.path, ['init', '-input=false', '-no-color'], { cwd: dir, env, extendEnv: false });
    await execa(bin.path, ['apply', '-auto-approve', '-input=false', '-no-color', '-var-file=vars.tfvars.json'], { cwd: dir, env, extendEnv: false });
    return performance.now() - t0;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function viaRezus(): Promise<number> {
  const h = await createHarness();
  const server = await listen(h);
  const worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'bench', leaseMs: 30_000, concurrency: 1, pollMs: 20, onInterrupted: (ids) => onRunsInterrupted(h.deps, ids) });
  worker.start();
  try {
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'bench' } });
    const c = await h.call('POST', '/v1/clusters', { body: { tenant: t.body.id, name: 'bench', endpoint: 'https://[2001:db8::1]:6443' } });
    for (const [i, n] of names.entries()) {
      await h.call('POST', `/v1/clusters/${c.body.id}/machines`, { body: { name: n, role: i < 3 ? 'controlplane' : 'worker', provider: 'local' } });
    }
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
  } finally {
    await worker.stop(0);
    await server.close();
    await h.close();
  }
}

await direct(); // warm the OS caches and terraform itself
const baseline = await direct();
const rezus = await viaRezus();
console.log(`machines: ${MACHINES}`);
console.log(`terraform init + apply directly (local state): ${baseline.toFixed(0)} ms`);
console.log(`RezusCloud provision (API, queue, http state backend, events): ${rezus.toFixed(0)} ms`);
console.log(`overhead ratio: ${(rezus / baseline).toFixed(2)}x`);
