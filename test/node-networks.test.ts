// REZUS_NODE_NETWORKS: addresses outside the list are refused by the API before anything is
// written, and never dialled by the runner (Talos API, Kubernetes API, port looks), names included.
import * as net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createDialGuard } from '../lib/dial-guard.ts';
import { openKubeWriter } from '../lib/kube/drain.ts';
import { collectKubernetes } from '../lib/kube/collect.ts';
import { KubeApiError } from '../lib/kube/errors.ts';
import { createTalosClient, isTalosApiError } from '../lib/talos/api/index.ts';
import { literalOutside, parseNodeNetworks, type NodeNetworks } from '../lib/talos/node-networks.ts';
import { edgeDeps } from '../functions/edge/deps.ts';
import { addonOptionsToEnv } from '../runner/addon-options.ts';
import { loadConfig } from '../runner/config.ts';
import { runCollectPass } from '../runner/jobs/collect/pass.ts';
import { lookAtPort } from '../runner/jobs/node-port.ts';
import { executors } from '../runner/jobs/registry.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { startSimCluster, type SimCluster } from './support/collect-fleet.ts';
import { createHarness, seedCluster, waitForRun, type Harness } from './support/harness.ts';
import { startSimNode, type SimTalosNode } from './sim/talos/index.ts';

const networks = (text: string): NodeNetworks => parseNodeNetworks(text)!;

/** A TCP listener on loopback that counts the connections it accepts (and closes them). */
async function countingListener(): Promise<{ port: number; accepted: () => number; close: () => Promise<void> }> {
  let accepted = 0;
  const server = net.createServer((s) => {
    accepted++;
    s.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    accepted: () => accepted,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

describe('the list itself', () => {
  it('parses CIDRs of both families and refuses anything else, naming the item', () => {
    expect(parseNodeNetworks('')).toBeUndefined();
    expect(parseNodeNetworks(' , ')).toBeUndefined();
    const n = networks(' 192.168.1.0/24 ,2001:db8::/48');
    expect(n.text).toBe('192.168.1.0/24,2001:db8::/48');
    expect(n.cidrs.map((c) => c.family)).toEqual([4, 6]);
    expect(() => parseNodeNetworks('192.168.1.0/24,lan')).toThrow(/"lan"/);
    expect(() => parseNodeNetworks('192.168.1.0')).toThrow(/CIDR/);
    expect(() => parseNodeNetworks('192.168.1.7/24')).toThrow(/192\.168\.1\.7\/24 has bits set below its prefix/);
  });

  it('is read by the runner at start, and a bad one stops it with the variable named', () => {
    expect(loadConfig({}).nodeNetworks).toBeUndefined();
    expect(loadConfig({ REZUS_NODE_NETWORKS: '10.0.0.0/8' }).nodeNetworks?.text).toBe('10.0.0.0/8');
    expect(() => loadConfig({ REZUS_NODE_NETWORKS: '10.0.0.0/33' })).toThrow(/^configuration: REZUS_NODE_NETWORKS: not a network/);
  });

  it('reaches the runner from the add-on option, and the Worker from its variable', () => {
    expect(addonOptionsToEnv({ node_networks: '192.168.1.0/24,2001:db8::/48' }).REZUS_NODE_NETWORKS).toBe('192.168.1.0/24,2001:db8::/48');
    expect(addonOptionsToEnv({ node_networks: '' }).REZUS_NODE_NETWORKS).toBeUndefined();
    expect(() => addonOptionsToEnv({ node_networks: 'my lan' })).toThrow(/node_networks: must be networks in CIDR form/);
    const edge = edgeDeps({ REZUS_DB_URL: 'http://127.0.0.1:9', REZUS_NODE_NETWORKS: '10.0.0.0/8' });
    expect(edge.settings.nodeNetworks?.text).toBe('10.0.0.0/8');
    expect(edgeDeps({ REZUS_DB_URL: 'http://127.0.0.1:9' }).settings.nodeNetworks).toBeUndefined();
    expect(() => edgeDeps({ REZUS_DB_URL: 'http://127.0.0.1:9', REZUS_NODE_NETWORKS: 'lan' })).toThrow(/"lan"/);
  });

  it('judges IP literals of both families, IPv4-mapped IPv6 as IPv4, and leaves names to the dial', () => {
    const n = networks('192.168.0.0/16,fd00::/8');
    expect(literalOutside('192.168.4.5', n)).toBeUndefined();
    expect(literalOutside('fd12::5', n)).toBeUndefined();
    expect(literalOutside('[fd12::5]', n)).toBeUndefined();
    expect(literalOutside('::ffff:192.168.4.5', n)).toBeUndefined();
    expect(literalOutside('10.0.0.1', n)).toBe('10.0.0.1 is outside the networks the runner may dial (REZUS_NODE_NETWORKS=192.168.0.0/16,fd00::/8)');
    expect(literalOutside('2001:db8::1', n)).toMatch(/^2001:db8::1 is outside/);
    expect(literalOutside('::ffff:10.0.0.1', n)).toMatch(/is outside/);
    expect(literalOutside('nas.lan', n)).toBeUndefined();
    expect(literalOutside('10.0.0.1', undefined)).toBeUndefined();
  });
});

describe('dials outside the list are never made', () => {
  let listener: Awaited<ReturnType<typeof countingListener>> | undefined;
  afterEach(async () => {
    await listener?.close();
    listener = undefined;
  });

  it('the Talos client fails not-allowed without a connection, for a literal and for a name resolving outside', async () => {
    listener = await countingListener();
    const guard = createDialGuard(networks('10.0.0.0/8'));
    for (const host of ['127.0.0.1', 'localhost']) {
      const client = createTalosClient({ mode: 'maintenance', address: `${host}:${listener.port}`, guard });
      const err = await client.version({ deadlineMs: 2_000 }).catch((e: unknown) => e);
      client.close();
      expect(isTalosApiError(err, 'not-allowed'), String(err)).toBe(true);
      expect((err as Error).message).toContain('REZUS_NODE_NETWORKS=10.0.0.0/8');
      if (host === 'localhost') expect((err as Error).message).toMatch(/localhost \(resolves to [^)]*127\.0\.0\.1/);
    }
    expect(listener.accepted()).toBe(0);
    // The same dial without the guard does reach the listener: the count above could have moved.
    const open = createTalosClient({ mode: 'maintenance', address: `127.0.0.1:${listener.port}` });
    await open.version({ deadlineMs: 2_000 }).catch(() => {});
    open.close();
    expect(listener.accepted()).toBe(1);
  });

  it('a name is dialled at the addresses it resolves to inside the list only', async () => {
    const node = await startSimNode();
    try {
      const guard = createDialGuard(networks('127.0.0.0/8'));
      const client = createTalosClient({ mode: 'maintenance', address: `localhost:${node.port}`, guard });
      expect((await client.version({ deadlineMs: 5_000 })).tag).toBe('v1.13.9');
      client.close();
    } finally {
      await node.stop();
    }
  });

  it('a look at a port outside the list makes no connection', async () => {
    listener = await countingListener();
    const guard = createDialGuard(networks('10.0.0.0/8'));
    expect(await lookAtPort(`127.0.0.1:${listener.port}`, 500, undefined, guard)).toBe('no-answer');
    expect(await lookAtPort(`localhost:${listener.port}`, 500, undefined, guard)).toBe('no-answer');
    expect(listener.accepted()).toBe(0);
    expect(await lookAtPort(`127.0.0.1:${listener.port}`, 500, undefined, createDialGuard(networks('127.0.0.0/8')))).toBe('open');
    expect(listener.accepted()).toBe(1);
  });

  it('the Kubernetes client fails not-allowed without a connection', async () => {
    listener = await countingListener();
    const guard = createDialGuard(networks('10.0.0.0/8'));
    for (const host of ['127.0.0.1', 'localhost']) {
      const kubeconfig = [
        'apiVersion: v1',
        'kind: Config',
        `clusters: [{name: c, cluster: {server: "https://${host}:${listener.port}", insecure-skip-tls-verify: true}}]`,
        'users: [{name: u, user: {token: t0ken-value}}]',
        'contexts: [{name: x, context: {cluster: c, user: u}}]',
        'current-context: x',
      ].join('\n');
      const writer = await openKubeWriter(kubeconfig, 2_000, { guard });
      const err = await writer.request('GET', '/api/v1/nodes').catch((e: unknown) => e);
      await writer.close();
      expect(err).toBeInstanceOf(KubeApiError);
      expect((err as KubeApiError).code).toBe('not-allowed');
      expect((err as Error).message).toContain('REZUS_NODE_NETWORKS=10.0.0.0/8');
      const read = await collectKubernetes(kubeconfig, { deadlineMs: 2_000, guard }).catch((e: unknown) => e);
      expect((read as KubeApiError).code).toBe('not-allowed');
    }
    expect(listener.accepted()).toBe(0);
  });
});

describe('the API', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('refuses machine addresses and cluster endpoints outside the list with 400, and writes nothing', async () => {
    h = await createHarness({ patchDeps: (d) => (d.settings.nodeNetworks = networks('192.168.0.0/16,2001:db8::/32')) });
    const { clusterId, tenantId } = await seedCluster(h);

    const outside = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'metal', address: '10.1.2.3:50000' } });
    expect(outside.status).toBe(400);
    expect(outside.body.error).toMatchObject({ code: 'address_not_allowed', details: { field: 'address' } });
    expect(outside.body.error.message).toBe('address: 10.1.2.3 is outside the networks the runner may dial (REZUS_NODE_NETWORKS=192.168.0.0/16,2001:db8::/32)');
    expect((await h.call('GET', `/v1/clusters/${clusterId}/machines`)).body.machines).toEqual([]);

    const inside = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'metal', address: '[2001:db8::7]:50000' } });
    expect(inside.status, JSON.stringify(inside.body)).toBe(201);
    const byName = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'cp2', role: 'controlplane', provider: 'metal', address: 'nas.lan' } });
    expect(byName.status).toBe(201);

    const moved = await h.call('PATCH', `/v1/clusters/${clusterId}/machines/${inside.body.id}`, { body: { address: 'fe80::1' } });
    expect(moved.status).toBe(400);
    expect(moved.body.error.code).toBe('address_not_allowed');
    expect((await h.call('GET', `/v1/clusters/${clusterId}/machines/${inside.body.id}`)).body.address).toBe('[2001:db8::7]:50000');

    const cluster = await h.call('POST', '/v1/clusters', { body: { tenant: tenantId, name: 'c2', talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3', endpoint: 'https://10.0.0.10:6443' } });
    expect(cluster.status).toBe(400);
    expect(cluster.body.error).toMatchObject({ code: 'address_not_allowed', details: { field: 'endpoint' } });
    expect((await h.call('GET', '/v1/clusters')).body.clusters.map((c: { name: string }) => c.name)).toEqual(['c1']);

    const endpoint = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { endpoint: 'https://10.0.0.10:6443' } });
    expect(endpoint.status).toBe(400);
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body.endpoint).toBe('https://[2001:db8::1]:6443');
  });

  it('refuses a mesh while the hub overlay prefix it would be dialled at is outside the list, before anything is written', async () => {
    h = await createHarness({ patchDeps: (d) => (d.settings.nodeNetworks = networks('192.168.0.0/16')) });
    const { clusterId } = await seedCluster(h, 'home', { endpoint: 'https://192.168.1.10:6443' });
    const refused = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820' } });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'mesh_outside_node_networks', details: { ipv4Prefix: '100.64.0.0/10' } });
    expect(refused.body.error.message).toMatch(/^the hub's overlay prefix 100\.64\.0\.0\/10 is outside REZUS_NODE_NETWORKS=192\.168\.0\.0\/16/);
    const after = await h.call('GET', `/v1/clusters/${clusterId}/mesh`);
    expect(after.body.enabled).toBe(false);
    expect(after.body.hub ?? null).toBeNull();

    // A prefix the list covers (an admin's choice) is taken.
    const inside = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820', ipv4Prefix: '192.168.200.0/24' } });
    expect(inside.status, JSON.stringify(inside.body)).toBe(200);
    expect(inside.body.hub.ipv4).toBe('192.168.200.1');
  });
});

describe('runs against a list that leaves the nodes out', () => {
  let h: Harness | undefined;
  let worker: Worker | undefined;
  let fleet: SimCluster | undefined;
  const sims: SimTalosNode[] = [];
  afterEach(async () => {
    await worker?.stop(0);
    worker = undefined;
    await fleet?.stop();
    fleet = undefined;
    for (const s of sims.splice(0)) await s.stop();
    await h?.close();
    h = undefined;
  });

  it('a push to a machine named by a host name resolving outside fails at once, naming the list, and the node sees nothing', async () => {
    h = await createHarness({
      patchDeps: (d) => {
        d.settings.nodeNetworks = networks('10.0.0.0/8');
        // A wait that took refusals for a rebooting node would run this long.
        d.settings.pushConfig = { callDeadlineMs: 2_000, readyTimeoutMs: 30_000, pollMs: 25 };
      },
    });
    worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'test', leaseMs: 5_000, concurrency: 1, pollMs: 20 });
    worker.start();
    const node = await startSimNode({ rebootMs: 20 });
    sims.push(node);
    const { clusterId } = await seedCluster(h, 'home', { endpoint: 'https://10.0.0.1:6443' });
    const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'metal', address: `localhost:${node.port}` } });
    expect(m.status).toBe(201);
    const res = await h.call('POST', `/v1/clusters/${clusterId}/machines/${m.body.id}/push-config`, { body: { insecure: true, certFingerprint: node.maintenanceFingerprint } });
    expect(res.status).toBe(202);
    const run = await waitForRun(h, res.body.run.id);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/not-allowed: localhost \(resolves to .*\) is outside the networks the runner may dial \(REZUS_NODE_NETWORKS=10\.0\.0\.0\/8\)/);
    expect(node.handshakes.accepted).toBe(0);
    expect(node.calls).toEqual([]);
    expect(node.phase).toBe('maintenance');
  });

  it('a collect pass reports the nodes and the Kubernetes API unreachable with the reason, and dials none of them', async () => {
    h = await createHarness();
    fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'cp1', role: 'controlplane' }, { name: 'w1', role: 'worker' }] });
    // Set after the machines were recorded at their loopback addresses, as a list tightened later would be.
    h.deps.settings.nodeNetworks = networks('10.0.0.0/8');
    const summary = await runCollectPass(h.deps);
    expect(summary).toMatchObject({ machines: 2, reached: 0, states: { unreachable: 2 } });
    const health = (await h.call('GET', `/v1/clusters/${fleet.clusterId}/health`)).body;
    for (const m of health.machines as { name: string; lastError: string | null }[]) expect(m.lastError, m.name).toMatch(/not-allowed: 127\.0\.0\.1 is outside the networks the runner may dial/);
    for (const name of ['cp1', 'w1']) {
      expect(fleet.machines[name]!.sim!.calls, name).toEqual([]);
      expect(fleet.machines[name]!.sim!.handshakes.accepted, name).toBe(0);
    }
    expect(fleet.kube.requests).toEqual([]);
  });
});
