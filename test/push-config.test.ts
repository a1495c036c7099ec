import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { PushTimings } from '../functions/context.ts';
import { executors } from '../runner/jobs/registry.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { startSimNode, type SimNodeOptions, type SimTalosNode } from './sim/talos/index.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';

let h: Harness;
let worker: Worker | undefined;
const sims: SimTalosNode[] = [];

afterEach(async () => {
  await worker?.stop(0);
  worker = undefined;
  for (const s of sims.splice(0)) await s.stop();
  await h?.close();
});

/** A harness with a real worker; Talos timings shrunk so failures end fast. */
async function setup(opts: { freshSecrets?: boolean; timings?: Partial<PushTimings> } = {}) {
  h = await createHarness({
    freshSecrets: opts.freshSecrets,
    patchDeps: (d) => {
      d.settings.pushConfig = { callDeadlineMs: 2_000, readyTimeoutMs: 5_000, pollMs: 25, ...opts.timings };
    },
  });
  worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'test', leaseMs: 5_000, concurrency: 4, pollMs: 20 });
  worker.start();
  return h;
}

async function sim(opts: SimNodeOptions = {}) {
  const s = await startSimNode({ rebootMs: 20, ...opts });
  sims.push(s);
  return s;
}

async function addMachine(clusterId: string, body: Record<string, unknown>) {
  const res = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { role: 'controlplane', provider: 'metal', ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id as string;
}

async function waitFor(runId: string, states = ['succeeded', 'failed', 'canceled', 'interrupted'], tries = 400) {
  for (let i = 0; i < tries; i++) {
    const run = await h.deps.jobs.get(runId);
    if (run && states.includes(run.state)) return run;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`run ${runId} never reached ${states.join('|')}`);
}

async function push(clusterId: string, mid: string, body: Record<string, unknown>, expectState?: string) {
  const res = await h.call('POST', `/v1/clusters/${clusterId}/machines/${mid}/push-config`, { body });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  expect(res.body.run.kind).toBe('push-config');
  const run = await waitFor(res.body.run.id);
  if (expectState) expect(run.state, run.error ?? '').toBe(expectState);
  return run;
}

async function events(runId: string) {
  return (await h.call('GET', `/v1/runs/${runId}/events`)).body.events as { type: string; level: string; message: string; data: Record<string, unknown> | null }[];
}

const machineOf = async (clusterId: string, mid: string) => (await h.call('GET', `/v1/clusters/${clusterId}/machines/${mid}`)).body;
const insecure = (s: SimTalosNode) => ({ insecure: true, certFingerprint: s.maintenanceFingerprint });

describe('push-config to a node in maintenance mode', () => {
  it('pushes the exact served config, waits for mTLS, records version and state, and logs no secrets', async () => {
    await setup();
    const node = await sim();
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: node.address });

    const run = await push(clusterId, mid, insecure(node), 'succeeded');
    const log = await events(run.id);
    expect(log.map((e) => e.type)).toEqual([
      'queued', 'started', 'push.render', 'push.connect', 'push.preflight', 'push.apply', 'push.applied', 'push.waiting', 'push.ready', 'push.done', 'succeeded',
    ]);
    expect(log.find((e) => e.type === 'push.connect')?.data).toMatchObject({ channel: 'maintenance', pinned: true, node: node.address });

    const m = await machineOf(clusterId, mid);
    expect(m.state).toBe('configured');
    expect(m.talosVersion).toBe('v1.13.9');
    expect(node.phase).toBe('configured');
    expect(node.receivedConfigs).toHaveLength(1);
    expect(node.receivedConfigs[0]).toMatchObject({ phase: 'maintenance', mode: 'AUTO', dryRun: false });

    const served = await h.call('GET', `/v1/clusters/${clusterId}/machines/${mid}/config`);
    expect(node.receivedConfigs[0]!.data.toString('utf8')).toBe(served.body);
    expect(log.find((e) => e.type === 'push.render')?.data?.sha256).toBe(createHash('sha256').update(served.body as string).digest('hex'));

    const secrets = await h.deps.newClusterSecrets();
    const text = JSON.stringify(log) + JSON.stringify(run);
    expect(text).not.toContain('PRIVATE KEY');
    expect(text).not.toContain(secrets.trustdToken);
    expect(text).not.toContain(secrets.bootstrapToken);
    expect(text).not.toContain(Buffer.from(secrets.certs.os.certPem).toString('base64').slice(0, 40));
  });

  it('re-pushes a configured machine over mTLS only; insecure is refused with 409', async () => {
    await setup();
    const node = await sim();
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: node.address });
    await push(clusterId, mid, insecure(node), 'succeeded');

    const refused = await h.call('POST', `/v1/clusters/${clusterId}/machines/${mid}/push-config`, { body: { insecure: true } });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('machine_configured');
    expect((await h.call('POST', `/v1/clusters/${clusterId}/machines/${mid}/push-config`, { body: { certFingerprint: node.maintenanceFingerprint } })).status).toBe(400);

    const patched = await h.call('PATCH', `/v1/clusters/${clusterId}/machines/${mid}`, { body: { patches: [{ machine: { sysctls: { 'vm.swappiness': '1' } } }] } });
    expect(patched.status).toBe(200);
    const run = await push(clusterId, mid, {}, 'succeeded');
    expect((await events(run.id)).find((e) => e.type === 'push.connect')?.data).toMatchObject({ channel: 'mtls' });
    expect(node.receivedConfigs).toHaveLength(2);
    expect(node.receivedConfigs[1]!.phase).toBe('configured');
    expect(node.receivedConfigs[1]!.data.toString('utf8')).toContain('vm.swappiness');
    const applies = node.calls.filter((c) => c.method === 'ApplyConfiguration');
    expect(applies.map((c) => c.roles)).toEqual([[], ['os:admin']]);
    expect((run.result as { mode: string }).mode).toBe('no-reboot');
  });

  it('a configured node told to reboot counts as configured only once its next boot answers', async () => {
    // Talos keeps answering for minutes while its reboot sequence stops the pods.
    await setup({ timings: { readyTimeoutMs: 1_000 } });
    const slow = await sim({ shutdownMs: 1_500 });
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: slow.address });
    await push(clusterId, mid, insecure(slow), 'succeeded');
    const failed = await push(clusterId, mid, { mode: 'reboot' }, 'failed');
    expect(failed.error).toMatch(/did not answer over mTLS within 1 s; last: the node still answers from its previous boot/);
    expect(slow.reboots).toEqual(['apply-configuration', 'apply-configuration']);

    const node = await sim({ shutdownMs: 300 });
    const other = await addMachine(clusterId, { name: 'cp2', address: node.address });
    await push(clusterId, other, insecure(node), 'succeeded');
    const run = await push(clusterId, other, { mode: 'reboot' }, 'succeeded');
    const types = (await events(run.id)).map((e) => e.type);
    expect(types.indexOf('push.rebooting')).toBeLessThan(types.indexOf('push.ready'));
    expect(node.calls.filter((c) => c.method === 'SystemStat').length).toBeGreaterThanOrEqual(2);
  });

  it('a dry run reaches the node with dry_run set and changes nothing', async () => {
    await setup();
    const node = await sim();
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: node.address });
    const run = await push(clusterId, mid, { ...insecure(node), dryRun: true }, 'succeeded');
    const types = (await events(run.id)).map((e) => e.type);
    expect(types).toContain('push.dry-run');
    expect(types).not.toContain('push.waiting');
    expect(node.receivedConfigs.map((r) => r.dryRun)).toEqual([true]);
    expect(node.phase).toBe('maintenance');
    expect(await machineOf(clusterId, mid)).toMatchObject({ state: 'new', talosVersion: null });
  });

  it('refuses a node whose certificate does not match the fingerprint before sending anything', async () => {
    await setup();
    const node = await sim({ uniqueMaintenanceCert: true });
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: node.address });
    const other = createHash('sha256').update('another node').digest('base64');
    const run = await push(clusterId, mid, { insecure: true, certFingerprint: other }, 'failed');
    expect(run.error).toMatch(/fingerprint-mismatch/);
    const err = (await events(run.id)).find((e) => e.type === 'push.error');
    expect(err?.data).toMatchObject({ step: 'preflight', code: 'fingerprint-mismatch', node: node.address });
    expect(node.calls).toHaveLength(0);
    expect(node.receivedConfigs).toHaveLength(0);
    expect((await machineOf(clusterId, mid)).state).toBe('new');
  });

  it('a node configured by another cluster is refused on both paths and the run fails', async () => {
    await setup({ freshSecrets: true });
    const a = await seedCluster(h, 'alpha');
    const b = await seedCluster(h, 'beta');
    const bMid = await addMachine(b.clusterId, { name: 'cp1', address: '127.0.0.1' });
    const bConfig = (await h.call('GET', `/v1/clusters/${b.clusterId}/machines/${bMid}/config`)).body as string;
    const foreign = await sim({ initialConfig: bConfig });

    // A machine with no config yet: the node is not in maintenance mode.
    const fresh = await addMachine(a.clusterId, { name: 'cp0', address: foreign.address });
    const first = await push(a.clusterId, fresh, { insecure: true }, 'failed');
    expect(first.error).toMatch(/ tls: .*not in maintenance mode/);

    // A configured machine whose address now points at that node: mTLS fails on the CA.
    const own = await sim();
    const mid = await addMachine(a.clusterId, { name: 'cp1', address: own.address });
    await push(a.clusterId, mid, insecure(own), 'succeeded');
    expect((await h.call('PATCH', `/v1/clusters/${a.clusterId}/machines/${mid}`, { body: { address: foreign.address } })).status).toBe(200);
    const run = await push(a.clusterId, mid, {}, 'failed');
    expect(run.error).toMatch(/ tls: /);
    expect((await events(run.id)).find((e) => e.type === 'push.error')?.data).toMatchObject({ step: 'preflight', code: 'tls', node: foreign.address });
    expect(foreign.receivedConfigs).toHaveLength(0);
    expect(await machineOf(a.clusterId, mid)).toMatchObject({ state: 'configured', talosVersion: 'v1.13.9' });
    expect((await machineOf(a.clusterId, fresh)).state).toBe('new');
  });

  it.each([
    ['unreachable', 'unreachable', async (s: SimTalosNode) => s.refuse()],
    ['slow (deadline)', 'deadline', async (s: SimTalosNode) => s.blackhole(true)],
    ['dropping mid-call', 'connection-lost', async (s: SimTalosNode) => s.dropConnectionsMidCall(true)],
  ] as const)('a node that is %s fails the run with its code and leaves the machine as it was', async (_name, code, fault) => {
    await setup({ timings: { callDeadlineMs: 300 } });
    const node = await sim();
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: node.address });
    await fault(node);
    const run = await push(clusterId, mid, insecure(node), 'failed');
    expect(run.error).toContain(node.address);
    expect(run.error).toContain(code);
    const err = (await events(run.id)).find((e) => e.type === 'push.error');
    expect(err).toMatchObject({ level: 'error', data: { code, node: node.address } });
    expect(node.receivedConfigs).toHaveLength(0);
    expect(await machineOf(clusterId, mid)).toMatchObject({ state: 'new', talosVersion: null });
  });

  it('a reply lost after the node took the config is confirmed over mTLS', async () => {
    await setup();
    const node = await sim();
    // Cut the connection while the node handles the apply: it keeps the config, the reply is lost.
    const record = node.receivedConfigs.push.bind(node.receivedConfigs);
    node.receivedConfigs.push = (...r) => {
      setImmediate(() => node.destroyConnections());
      return record(...r);
    };
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: node.address });
    const run = await push(clusterId, mid, insecure(node), 'succeeded');
    const types = (await events(run.id)).map((e) => e.type);
    expect(types).toContain('push.unconfirmed');
    expect(types).not.toContain('push.applied');
    expect(await machineOf(clusterId, mid)).toMatchObject({ state: 'configured', talosVersion: 'v1.13.9' });
  });

  it('a connection dropped on the apply itself fails after the wait and leaves the machine new', async () => {
    await setup({ timings: { readyTimeoutMs: 400 } });
    const node = await sim();
    const arrive = node.calls.push.bind(node.calls);
    node.calls.push = (...c) => {
      if (c[0]?.method === 'ApplyConfiguration') node.dropConnectionsMidCall(true);
      return arrive(...c);
    };
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: node.address });
    const run = await push(clusterId, mid, insecure(node), 'failed');
    expect((await events(run.id)).find((e) => e.type === 'push.unconfirmed')?.data).toMatchObject({ code: 'connection-lost', node: node.address });
    expect(run.error).toMatch(/did not answer over mTLS/);
    expect(node.receivedConfigs).toHaveLength(0);
    expect(node.phase).toBe('maintenance');
    expect((await machineOf(clusterId, mid)).state).toBe('new');
  });

  it('a node that takes the config but never answers over mTLS fails the wait and stays mTLS-only', async () => {
    await setup({ timings: { readyTimeoutMs: 400 } });
    const node = await sim({ rebootMs: 60_000 });
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: node.address });
    const run = await push(clusterId, mid, insecure(node), 'failed');
    expect(run.error).toMatch(/did not answer over mTLS/);
    expect(node.receivedConfigs).toHaveLength(1);
    expect((await machineOf(clusterId, mid)).state).toBe('applied');
    expect((await h.call('POST', `/v1/clusters/${clusterId}/machines/${mid}/push-config`, { body: insecure(node) })).status).toBe(409);
  });

  it('cancel stops a run stuck on a silent node', async () => {
    await setup({ timings: { callDeadlineMs: 60_000 } });
    const node = await sim();
    node.blackhole(true);
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: node.address });
    const res = await h.call('POST', `/v1/clusters/${clusterId}/machines/${mid}/push-config`, { body: insecure(node) });
    await waitFor(res.body.run.id, ['running']);
    await h.call('POST', `/v1/runs/${res.body.run.id}/cancel`);
    // Bounded well below the 60 s call deadline: only the signal can end it this soon.
    const run = await waitFor(res.body.run.id, ['canceled', 'failed', 'succeeded'], 200);
    expect(run.state).toBe('canceled');
    expect((await machineOf(clusterId, mid)).state).toBe('new');
  });
});

describe('push-config requests refused at enqueue', () => {
  it('cloud machines, missing address, missing insecure, bad fingerprint; nothing is queued', async () => {
    await setup();
    const { clusterId } = await seedCluster(h);
    const cloud = await addMachine(clusterId, { name: 'vm1', provider: 'hetzner', address: '2001:db8::20' });
    const noAddr = await addMachine(clusterId, { name: 'cp1' });
    const metal = await addMachine(clusterId, { name: 'cp2', address: '2001:db8::30' });
    const call = (mid: string, body: unknown) => h.call('POST', `/v1/clusters/${clusterId}/machines/${mid}/push-config`, { body });

    const c = await call(cloud, { insecure: true });
    expect([c.status, c.body.error.code]).toEqual([409, 'not_metal']);
    const a = await call(noAddr, { insecure: true });
    expect([a.status, a.body.error.code]).toEqual([400, 'no_address']);
    const i = await call(metal, {});
    expect([i.status, i.body.error.code]).toEqual([400, 'insecure_required']);
    expect((await call(metal, { insecure: true, certFingerprint: 'abc' })).status).toBe(400);
    expect((await call(metal, { insecure: true, mode: 'staged' })).status).toBe(400);
    expect((await call(metal, { insecure: true, extra: 1 })).status).toBe(400);
    expect((await h.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs).toHaveLength(0);
  });

  it("another tenant's token gets 404 for push-config and bootstrap", async () => {
    await setup();
    const { clusterId } = await seedCluster(h, 'home');
    const mid = await addMachine(clusterId, { name: 'cp1', address: '2001:db8::10' });
    const other = await h.call('POST', '/v1/tenants', { body: { name: 'other' } });
    const tok = await h.call('POST', `/v1/tenants/${other.body.id}/tokens`, { body: { name: 'x' } });
    const token = tok.body.token as string;
    expect((await h.call('POST', `/v1/clusters/${clusterId}/machines/${mid}/push-config`, { body: { insecure: true }, token })).status).toBe(404);
    expect((await h.call('POST', `/v1/clusters/${clusterId}/bootstrap`, { body: {}, token })).status).toBe(404);
    expect((await h.call('GET', `/v1/runs?cluster=${clusterId}`)).body.runs).toHaveLength(0);
  });
});

describe('bootstrap', () => {
  it('needs a configured control plane, picks the first by name, runs once, then answers 409', async () => {
    await setup();
    const [nodeA, nodeB] = [await sim(), await sim()];
    const { clusterId } = await seedCluster(h);
    await addMachine(clusterId, { name: 'cp-a', address: nodeA.address });
    const midB = await addMachine(clusterId, { name: 'cp-b', address: nodeB.address });
    const boot = (body: unknown = {}) => h.call('POST', `/v1/clusters/${clusterId}/bootstrap`, { body });

    const early = await boot();
    expect([early.status, early.body.error.code]).toEqual([409, 'not_configured']);
    expect(early.body.error.message).toMatch(/cp-a/);

    await push(clusterId, midB, insecure(nodeB), 'succeeded');
    expect((await boot()).status).toBe(409); // cp-a comes first by name and is not configured
    const named = await boot({ machine: 'cp-b' });
    expect(named.status).toBe(202);
    const run = await waitFor(named.body.run.id);
    expect(run.state, run.error ?? '').toBe('succeeded');
    expect((await events(run.id)).map((e) => e.type)).toEqual(['queued', 'started', 'bootstrap.connect', 'bootstrap.preflight', 'bootstrap.send', 'bootstrap.done', 'succeeded']);
    expect(nodeB.bootstrapCalls).toHaveLength(1);
    expect(nodeA.bootstrapCalls).toHaveLength(0);
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body.bootstrapped).toBe(true);

    const again = await boot({ machine: midB });
    expect([again.status, again.body.error.code]).toEqual([409, 'already_bootstrapped']);
    expect(nodeB.bootstrapCalls).toHaveLength(1);
  });

  it('a node that refuses the bootstrap leaves the cluster unbootstrapped', async () => {
    await setup();
    const node = await sim();
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: node.address });
    await push(clusterId, mid, insecure(node), 'succeeded');
    node.bootstrapped = true; // etcd already has data (bootstrapped out of band)
    const res = await h.call('POST', `/v1/clusters/${clusterId}/bootstrap`, { body: {} });
    const run = await waitFor(res.body.run.id);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/already-exists/);
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body.bootstrapped).toBe(false);
  });

  it('runs are exclusive per cluster: a second push while one is queued gets 409 with the active run', async () => {
    await setup();
    await worker!.stop(0); // keep runs queued
    worker = undefined;
    const node = await sim();
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(clusterId, { name: 'cp1', address: node.address });
    const first = await h.call('POST', `/v1/clusters/${clusterId}/machines/${mid}/push-config`, { body: insecure(node) });
    expect(first.status).toBe(202);
    const second = await h.call('POST', `/v1/clusters/${clusterId}/machines/${mid}/push-config`, { body: insecure(node) });
    expect(second.status).toBe(409);
    expect(second.body.error.details.activeRun).toBe(first.body.run.id);
  });
});
