// The mesh wired into the product: configs carry the WireguardConfig, Talos calls go to the
// overlay address once the node holds it, an endpoint change re-pushes affected nodes over the
// mesh, and the STUN check (against real coturn, on loopback and across network namespaces) moves
// `stun` clusters.
import { talosDialer } from '../functions/machine-config/access.ts';
import { randomInt } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { machines } from '../db/schema/index.ts';
import { applyStunReport, meshStunCron, checkStun, usableEndpoint } from '../runner/jobs/mesh/stun.ts';
import type { NatReport } from '../lib/mesh/stun.ts';
import { createNetnsPair, netnsSkipReason } from './support/netns.ts';
import { CHILD, inNs } from './support/mesh-netns.ts';
import { executors } from '../runner/jobs/registry.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { loadConfig } from '../runner/config.ts';
import { addonOptionsToEnv } from '../runner/addon-options.ts';
import { ensureHub, loadPeer, markDelivered, setClusterMesh } from '../lib/mesh/store.ts';
import { stunAdvice } from '../lib/mesh/stun-state.ts';
import { validateConfigDocuments } from '../lib/talos/schema.ts';
import { startSimNode, type SimTalosNode } from './sim/talos/index.ts';
import { startCoturns, freeUdpPort, type Coturns } from './support/coturn.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';

/** The hub on a loopback /16 of its own, as a stand-in overlay the sims can listen on. */
const loopbackHub = (h: Harness) => ensureHub(h.deps, { ipv4Prefix: `127.${randomInt(1, 250)}.0.0/16` });

let h: Harness | undefined;
let worker: Worker | undefined;
const sims: SimTalosNode[] = [];

afterEach(async () => {
  await worker?.stop(0);
  worker = undefined;
  for (const s of sims.splice(0)) await s.stop();
  await h?.close();
  h = undefined;
});

async function addMachine(hh: Harness, clusterId: string, body: Record<string, unknown>): Promise<string> {
  const res = await hh.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { role: 'controlplane', provider: 'metal', ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id as string;
}

async function waitFor(hh: Harness, runId: string) {
  for (let i = 0; i < 600; i++) {
    const run = await hh.deps.jobs.get(runId);
    if (run && ['succeeded', 'failed', 'canceled', 'interrupted'].includes(run.state)) return run;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`run ${runId} did not end`);
}

describe('configs carry the mesh', () => {
  it('a mesh node config holds its WireguardConfig and validates; without the mesh it is unchanged', async () => {
    h = await createHarness();
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(h, clusterId, { name: 'cp1', address: '192.0.2.10' });
    const config = async () => (await h!.call('GET', `/v1/clusters/${clusterId}/machines/${mid}/config`)).body as string;
    const plain = await config();
    expect(plain).not.toContain('WireguardConfig');

    expect((await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820' } })).status).toBe(200);
    const meshed = await config();
    expect(meshed.startsWith(plain)).toBe(true);
    expect(meshed).toMatch(/kind: WireguardConfig[\s\S]*endpoint: 203\.0\.113\.7:51820/);
    expect(validateConfigDocuments(meshed)).toEqual([]);
    expect(await config()).toBe(meshed);

    expect((await h.call('DELETE', `/v1/clusters/${clusterId}/mesh`)).status).toBe(200);
    expect(await config()).toBe(plain);
  });
});

describe('endpoint change re-pushes nodes over the mesh', () => {
  it('PUT with a new endpoint queues a run that applies the new config at the overlay address, without reboot', async () => {
    h = await createHarness({ patchDeps: (d) => void (d.settings.pushConfig = { callDeadlineMs: 2_000, readyTimeoutMs: 5_000, pollMs: 25 }) });
    worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'test', leaseMs: 5_000, concurrency: 2, pollMs: 20 });
    worker.start();
    const { clusterId } = await seedCluster(h);
    // The direct address answers nothing: only the overlay path can reach the node.
    const dead = await freeUdpPort();
    const mid = await addMachine(h, clusterId, { name: 'cp1', address: `127.0.0.1:${dead}` });
    // A loopback prefix stands in for the overlay, so the sim can listen on the node's overlay
    // address; the API refuses one (it reaches no other host), so the hub is laid down directly.
    await loopbackHub(h);
    const on = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820' } });
    expect(on.status, JSON.stringify(on.body)).toBe(200);
    expect(on.body.repush).toBeNull();
    const overlay = on.body.peers[0].ipv4 as string;

    const first = (await h.call('GET', `/v1/clusters/${clusterId}/machines/${mid}/config`)).body as string;
    const node = await startSimNode({ host: overlay, port: 50000, initialConfig: first, rebootMs: 20 });
    sims.push(node);
    // As after a push: configured, holding the mesh document with the first endpoint.
    await h.deps.db.update(machines).set({ state: 'configured' }).where(eq(machines.id, mid));
    expect((await talosDialer(h.deps, clusterId))({ id: mid, address: `127.0.0.1:${dead}`, ipv4: null, ipv6: null })).toBe(`127.0.0.1:${dead}`);
    await markDelivered(h.deps.db, mid, '203.0.113.7:51820');
    const dial = await talosDialer(h.deps, clusterId);
    expect(dial({ id: mid, address: `127.0.0.1:${dead}`, ipv4: null, ipv6: null })).toBe(overlay);
    // The Kubernetes API of a mesh cluster: same port, the first control plane on the overlay.
    expect(dial.kubeEndpoint({ endpoint: 'https://[2001:db8::1]:6443' }, [{ id: mid, role: 'controlplane' }])).toBe(`https://${overlay}:6443`);
    expect(dial.kubeEndpoint({ endpoint: 'https://[2001:db8::1]:6443' }, [{ id: mid, role: 'worker' }])).toBe('https://[2001:db8::1]:6443');

    const moved = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.9:51820' } });
    expect(moved.status).toBe(200);
    expect(moved.body.pending).toEqual([{ machine: mid, name: 'cp1', delivered: '203.0.113.7:51820', wanted: '203.0.113.9:51820' }]);
    expect(moved.body.repush).toMatchObject({ machines: 1 });
    const run = await waitFor(h, moved.body.repush.run);
    expect(run.state, run.error ?? '').toBe('succeeded');
    expect(run.kind).toBe('mesh-repush');

    const events = (await h.call('GET', `/v1/runs/${run.id}/events`)).body.events as { type: string; message: string }[];
    expect(events.find((e) => e.type === 'mesh.repush.plan')?.message).toBe(
      'hub endpoint changed from 203.0.113.7:51820 to 203.0.113.9:51820: re-pushing 1 node(s) over the mesh: cp1',
    );
    expect(events.find((e) => e.type === 'mesh.repush.applied')?.message).toContain(`cp1: config applied without reboot at ${overlay}; its WireGuard now dials 203.0.113.9:51820 (was 203.0.113.7:51820)`);
    expect(JSON.stringify(events)).not.toMatch(/privateKey|BEGIN .*PRIVATE/);

    const applied = node.receivedConfigs.at(-1)!;
    expect(applied.mode).toBe('NO_REBOOT');
    expect(applied.data.toString()).toMatch(/kind: WireguardConfig[\s\S]*endpoint: 203\.0\.113\.9:51820/);
    expect((await loadPeer(h.deps.db, mid))?.deliveredEndpoint).toBe('203.0.113.9:51820');
    expect((await h.call('GET', `/v1/clusters/${clusterId}/mesh`)).body.pending).toEqual([]);
    const again = await h.call('POST', `/v1/clusters/${clusterId}/mesh/repush`);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('nothing_pending');
  }, 30_000);

  it('the first push (maintenance mode, direct address) delivers the mesh document; from then on the node is dialled on the overlay', async () => {
    h = await createHarness({ patchDeps: (d) => void (d.settings.pushConfig = { callDeadlineMs: 2_000, readyTimeoutMs: 5_000, pollMs: 25 }) });
    worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'test', leaseMs: 5_000, concurrency: 2, pollMs: 20 });
    worker.start();
    const node = await startSimNode({ rebootMs: 20 });
    sims.push(node);
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(h, clusterId, { name: 'cp1', address: node.address });
    await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820' } });
    const res = await h.call('POST', `/v1/clusters/${clusterId}/machines/${mid}/push-config`, { body: { insecure: true, certFingerprint: node.maintenanceFingerprint } });
    expect(res.status).toBe(202);
    const run = await waitFor(h, res.body.run.id);
    expect(run.state, run.error ?? '').toBe('succeeded');
    expect(node.receivedConfigs[0]!.data.toString()).toMatch(/kind: WireguardConfig[\s\S]*endpoint: 203\.0\.113\.7:51820/);
    expect((await loadPeer(h.deps.db, mid))?.deliveredEndpoint).toBe('203.0.113.7:51820');
    const [row] = await h.deps.db.select().from(machines).where(eq(machines.id, mid));
    expect((await talosDialer(h.deps, clusterId))(row!)).toMatch(/^100\.64\.0\.\d+$/);
  }, 30_000);

  it('a node that cannot be reached fails the run by name; POST …/mesh/repush queues it again', async () => {
    h = await createHarness({ patchDeps: (d) => void (d.settings.pushConfig = { callDeadlineMs: 500, readyTimeoutMs: 1_000, pollMs: 25 }) });
    worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'test', leaseMs: 5_000, concurrency: 2, pollMs: 20 });
    worker.start();
    const { clusterId } = await seedCluster(h);
    const mid = await addMachine(h, clusterId, { name: 'far1', address: '127.0.0.1:1' });
    await loopbackHub(h);
    await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820' } });
    await h.deps.db.update(machines).set({ state: 'configured' }).where(eq(machines.id, mid));
    await markDelivered(h.deps.db, mid, '203.0.113.7:51820');
    const moved = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.9:51820' } });
    const run = await waitFor(h, moved.body.repush.run);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^re-push failed for far1: /);
    expect((await loadPeer(h.deps.db, mid))?.deliveredEndpoint).toBe('203.0.113.7:51820');
    const retry = await h.call('POST', `/v1/clusters/${clusterId}/mesh/repush`);
    expect(retry.status).toBe(202);
    expect(retry.body.run.kind).toBe('mesh-repush');
    await waitFor(h, retry.body.run.id);
  }, 30_000);
});

describe('STUN in the product', () => {
  let coturn: Coturns;
  beforeAll(async () => {
    coturn = await startCoturns(2);
  }, 20_000);
  afterAll(async () => {
    await coturn?.stop();
  });

  /** A cluster whose endpoint follows STUN, with a node holding a config from an earlier discovery. */
  async function stunCluster(servers: Array<{ host: string; port: number }>): Promise<{ hh: Harness; clusterId: string }> {
    const hh = (h = await createHarness());
    const { clusterId } = await seedCluster(hh);
    const mid = await addMachine(hh, clusterId, { name: 'cp1', address: '192.0.2.10' });
    expect(meshStunCron(hh.deps)).toEqual([]);
    const off = await hh.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: 'stun' } });
    expect(off.status).toBe(400);
    expect(off.body.error.code).toBe('stun_off');

    hh.deps.settings.meshStunServers = servers;
    expect(meshStunCron(hh.deps).map((c) => [c.name, c.pattern])).toEqual([['mesh-stun', '* * * * *']]);
    const on = await hh.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: 'stun' } });
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ endpoint: null, endpointSource: 'stun', stun: { enabled: true, mapping: null } });
    await setClusterMesh(hh.deps, clusterId, { endpoint: '192.0.2.1:51820', endpointSource: 'stun', relay: null });
    await markDelivered(hh.deps.db, mid, '192.0.2.1:51820');
    return { hh, clusterId };
  }

  it('the setting turns the cron on; servers that see the hub at a loopback address move nothing, and the advice says why', async () => {
    const servers = coturn.ports.map((port) => ({ host: '127.0.0.1', port }));
    const { hh, clusterId } = await stunCluster(servers);

    // Real STUN on loopback: no NAT, but 127.0.0.1 is no address a node elsewhere can dial.
    const check = await checkStun(hh.deps, servers, { bindAddress: '127.0.0.1' });
    expect(check).toEqual({ mapping: 'none', endpoint: null, previous: null, moved: [] });
    const got = (await hh.call('GET', `/v1/clusters/${clusterId}/mesh`)).body;
    expect(got.endpoint).toBe('192.0.2.1:51820');
    expect(got.stun).toMatchObject({ mapping: 'none', publicAddress: '127.0.0.1', endpoint: null });
    expect(got.stun.advice).toBe('the STUN servers see the hub as 127.0.0.1, a loopback address nodes elsewhere cannot dial: use STUN servers on the internet; the endpoint is left as it was');
    expect(got.stun.observed).toHaveLength(2);
    expect(await hh.deps.jobs.list({ clusterId })).toEqual([]);

    // One server silent: the mapping is unknown and the clusters keep their endpoint.
    const silent = await freeUdpPort();
    const unknown = await checkStun(hh.deps, [servers[0]!, { host: '127.0.0.1', port: silent }], { bindAddress: '127.0.0.1', timeoutMs: 500 });
    expect(unknown).toMatchObject({ mapping: 'unknown', endpoint: null, moved: [] });
    expect((await hh.call('GET', `/v1/clusters/${clusterId}/mesh`)).body).toMatchObject({ endpoint: '192.0.2.1:51820', stun: { mapping: 'unknown' } });
  }, 30_000);

  it.skipIf(netnsSkipReason() !== null)('endpoint "stun" follows a check that sees a routable address and queues the re-push of stale nodes', async () => {
    // The hub's check runs in a namespace of its own on 198.51.100.1 (TEST-NET-2, routed nowhere
    // else), against coturn in the other namespace: real STUN, an address that is not a private one.
    const pair = await createNetnsPair();
    const turns = await startCoturns(2, { ns: pair.b, host: pair.bAddr });
    try {
      const servers = turns.ports.map((port) => ({ host: pair.bAddr, port }));
      const probe = await inNs(pair.a, CHILD, ['stun', pair.aAddr, servers.map((x) => `${x.host}:${x.port}`).join(',')]);
      expect(probe.exitCode, String(probe.stderr)).toBe(0);
      const report = JSON.parse(String(probe.stdout).trim()) as NatReport;
      expect(report).toMatchObject({ mapping: 'none', endpoint: { address: pair.aAddr } });

      const { hh, clusterId } = await stunCluster(servers);
      const check = await applyStunReport(hh.deps, report);
      expect(check).toMatchObject({ mapping: 'none', endpoint: '198.51.100.1:51820', previous: null });
      expect(check!.moved).toHaveLength(1);
      const run = await hh.deps.jobs.get(check!.moved[0]!.run!);
      expect(run?.kind).toBe('mesh-repush');
      expect(run?.params).toEqual({ reason: 'hub endpoint changed from 192.0.2.1:51820 to 198.51.100.1:51820 (STUN)' });

      const got = (await hh.call('GET', `/v1/clusters/${clusterId}/mesh`)).body;
      expect(got.endpoint).toBe('198.51.100.1:51820');
      expect(got.peers[0].dials).toBe('198.51.100.1:51820');
      expect(got.stun).toMatchObject({ mapping: 'none', publicAddress: '198.51.100.1', endpoint: '198.51.100.1:51820', advice: 'no NAT: nodes dial 198.51.100.1:51820' });
      // Same answer again: nothing moves, nothing is queued.
      expect((await applyStunReport(hh.deps, report))!.moved).toEqual([]);
    } finally {
      await turns.stop();
      await pair.cleanup();
    }
  }, 40_000);

  it('a symmetric NAT gives no endpoint and says to use the relay', () => {
    const observed = [{ server: 'a:3478', mapped: { address: '198.51.100.9', port: 40001, family: 4 as const } }];
    expect(usableEndpoint({ mapping: 'endpoint-dependent', endpoint: null, observed }, 51820)).toBeNull();
    expect(usableEndpoint({ mapping: 'endpoint-independent', endpoint: observed[0]!.mapped, observed }, 51820)).toBe('198.51.100.9:51820');
    // A mapping on the hub's own network is no endpoint for nodes elsewhere, NAT or not.
    for (const address of ['10.1.2.3', '172.20.0.5', '192.168.1.10', '100.64.0.9', '127.0.0.1', '169.254.1.1', 'fd12::5', 'fe80::1']) {
      const mapped = { address, port: 40001, family: (address.includes(':') ? 6 : 4) as 4 | 6 };
      for (const mapping of ['none', 'endpoint-independent'] as const) expect(usableEndpoint({ mapping, endpoint: mapped, observed }, 51820), `${mapping} ${address}`).toBeNull();
    }
    expect(stunAdvice({ mapping: 'endpoint-independent', endpoint: null, publicAddress: '192.168.1.10' })).toMatch(/^the STUN servers see the hub as 192\.168\.1\.10, a private \(RFC 1918\) address nodes elsewhere cannot dial/);
    expect(stunAdvice({ mapping: 'endpoint-independent', endpoint: '203.0.113.5:51820', publicAddress: '203.0.113.5' })).toMatch(/^behind a NAT with a stable mapping: nodes dial 203\.0\.113\.5:51820/);
    expect(stunAdvice({ mapping: 'endpoint-dependent', endpoint: null })).toMatch(/symmetric NAT.*use the relay/);
  });

  it('REZUS_MESH_STUN_SERVERS is off by default, needs two servers, and is parsed', () => {
    expect(loadConfig({}).meshStunServers).toEqual([]);
    expect(loadConfig({ REZUS_MESH_STUN_SERVERS: 'stun1.example.net:3478,[2001:db8::1]:3478' }).meshStunServers).toEqual([
      { host: 'stun1.example.net', port: 3478 },
      { host: '2001:db8::1', port: 3478 },
    ]);
    expect(() => loadConfig({ REZUS_MESH_STUN_SERVERS: 'stun1.example.net:3478' })).toThrow(/two STUN servers/);
    expect(() => loadConfig({ REZUS_MESH_STUN_SERVERS: 'nohost' })).toThrow(/host:port/);
    // The Home Assistant add-on's option feeds the same setting.
    const env = addonOptionsToEnv({ mesh_stun_servers: 'stun1.example.net:3478,[2001:db8::1]:3478' });
    expect(loadConfig(env).meshStunServers).toHaveLength(2);
    expect(addonOptionsToEnv({ mesh_stun_servers: '' }).REZUS_MESH_STUN_SERVERS).toBeUndefined();
    expect(() => addonOptionsToEnv({ mesh_stun_servers: 'stun1.example.net:3478' })).toThrow(/mesh_stun_servers: must be two STUN servers/);
  });
});
