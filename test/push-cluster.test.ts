import { afterEach, describe, expect, it } from 'vitest';
import { executors } from '../runner/jobs/registry.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { startSimNode, type SimTalosNode } from './sim/talos/index.ts';
import { createHarness, seedCluster, sharedSecrets, type Harness } from './support/harness.ts';

let h: Harness;
let worker: Worker | undefined;
const sims: SimTalosNode[] = [];

afterEach(async () => {
  await worker?.stop(0);
  worker = undefined;
  for (const s of sims.splice(0)) await s.stop();
  await h?.close();
});

async function setup(): Promise<void> {
  h = await createHarness({
    patchDeps: (d) => {
      d.settings.pushConfig = { callDeadlineMs: 2_000, readyTimeoutMs: 5_000, pollMs: 25 };
    },
  });
  worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'test', leaseMs: 5_000, concurrency: 2, pollMs: 20 });
  worker.start();
}

async function waitFor(runId: string) {
  for (let i = 0; i < 800; i++) {
    const run = await h.deps.jobs.get(runId);
    if (run && ['succeeded', 'failed', 'canceled', 'interrupted'].includes(run.state)) return run;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`run ${runId} did not finish`);
}

/** A rack: 3 control planes and 5 workers, all in maintenance mode, each with a unique certificate. */
async function rack(clusterId: string) {
  const secrets = await sharedSecrets();
  const out: Array<{ name: string; id: string; sim: SimTalosNode }> = [];
  for (const [i, role] of ['controlplane', 'controlplane', 'controlplane', 'worker', 'worker', 'worker', 'worker', 'worker'].entries()) {
    const name = role === 'controlplane' ? `cp${i + 1}` : `w${i - 2}`;
    const sim = await startSimNode({ rebootMs: 20, uniqueMaintenanceCert: true, ...(role === 'worker' ? { workerIssuer: secrets.certs.os } : {}) });
    sims.push(sim);
    const res = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name, role, provider: 'metal', address: sim.address } });
    expect(res.status).toBe(201);
    out.push({ name, id: res.body.id, sim });
  }
  return out;
}

describe('POST /v1/clusters/:id/push-config (whole cluster)', () => {
  it('pushes 8 machines in one run; a bad fingerprint fails only its machine; bootstraps the first control plane', async () => {
    await setup();
    const { clusterId } = await seedCluster(h);
    const nodes = await rack(clusterId);
    const other = nodes[6]!.sim.maintenanceFingerprint;
    const machines = nodes.map((n) => ({ id: n.name, certFingerprint: n.name === 'w2' ? other : n.sim.maintenanceFingerprint }));
    const res = await h.call('POST', `/v1/clusters/${clusterId}/push-config`, { body: { machines, insecure: true, bootstrap: true } });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body.run.kind).toBe('push-cluster');
    const run = await waitFor(res.body.run.id);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^push failed for w2: /);
    expect(run.error).not.toMatch(/cp1|cp2|cp3|w1|w3|w4|w5/);

    for (const n of nodes) {
      const m = (await h.call('GET', `/v1/clusters/${clusterId}/machines/${n.id}`)).body;
      if (n.name === 'w2') {
        expect(n.sim.receivedConfigs).toEqual([]);
        expect(n.sim.phase).toBe('maintenance');
        expect(m.state).not.toBe('configured');
      } else {
        expect(n.sim.phase).toBe('configured');
        expect(m.state).toBe('configured');
      }
    }
    expect(nodes[0]!.sim.bootstrapCalls).toHaveLength(1);
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body.bootstrappedAt).not.toBeNull();

    const evs = (await h.call('GET', `/v1/runs/${run.id}/events`)).body.events as Array<{ type: string; message: string; data: Record<string, unknown> | null }>;
    // Every machine's own steps are in the log, tagged with it.
    for (const n of nodes.filter((x) => x.name !== 'w2')) expect(evs.some((e) => e.type === 'push.done' && e.data?.['name'] === n.name)).toBe(true);
    expect(evs.find((e) => e.type === 'push.machine.failed')?.data?.['name']).toBe('w2');
    expect(evs.find((e) => e.type === 'push.summary')?.data).toMatchObject({ configured: ['cp1', 'cp2', 'cp3', 'w1', 'w3', 'w4', 'w5'], bootstrapped: 'cp1' });
    // Pushed concurrently: some machine started before another one finished.
    const firstDone = evs.findIndex((e) => e.type === 'push.done');
    expect(evs.slice(0, firstDone).filter((e) => e.type === 'push.apply').length).toBeGreaterThan(1);
  });

  it('defaults to every metal machine and refuses bad requests without queuing anything', async () => {
    await setup();
    const { clusterId } = await seedCluster(h);
    const nodes = await rack(clusterId);
    const path = `/v1/clusters/${clusterId}/push-config`;
    const noInsecure = await h.call('POST', path, { body: {} });
    expect(noInsecure.status).toBe(400);
    expect(noInsecure.body.error.code).toBe('insecure_required');
    expect((await h.call('POST', path, { body: { machines: [{ id: 'nope' }], insecure: true } })).status).toBe(400);
    expect((await h.call('POST', path, { body: { machines: [{ id: 'cp1' }, { id: 'cp1' }], insecure: true } })).status).toBe(400);
    expect((await h.call('POST', path, { body: { machines: [{ id: 'cp1', certFingerprint: 'zz' }], insecure: true } })).status).toBe(400);
    expect((await h.call('POST', path, { body: { machines: [{ id: 'w1' }], insecure: true, bootstrap: true } })).status).toBe(400);
    expect((await h.call('POST', path, { body: { insecure: true, surprise: 1 } })).status).toBe(400);
    expect((await h.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs).toEqual([]);

    const ok = await h.call('POST', path, { body: { insecure: true } });
    expect(ok.status).toBe(202);
    expect(ok.body.run.params.machines.map((m: { id: string }) => m.id).sort()).toEqual(nodes.map((n) => n.id).sort());
    const run = await waitFor(ok.body.run.id);
    expect(run.state, run.error ?? '').toBe('succeeded');
    for (const n of nodes) expect(n.sim.phase).toBe('configured');
  });
});
