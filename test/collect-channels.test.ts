import * as net from 'node:net';
import { eq } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { clusters, machineHealth, machines } from '../db/schema/index.ts';
import { openClusterSecrets, sealClusterSecrets } from '../functions/machine-config/secrets.ts';
import { collectAccessCache } from '../runner/jobs/collect/access-cache.ts';
import { runCollectPass } from '../runner/jobs/collect/pass.ts';
import { generateSecrets } from '../lib/talos/secrets.ts';
import { startSimNode, type SimTalosNode } from './sim/talos/index.ts';
import { createHarness, type Harness } from './support/harness.ts';
import { startSimCluster, type SimCluster } from './support/collect-fleet.ts';

let h: Harness;
let fleet: SimCluster | undefined;
const extra: SimTalosNode[] = [];
let nowMs = Date.parse('2026-12-01T10:00:00Z');
const relays: Relay[] = [];

afterEach(async () => {
  await fleet?.stop();
  fleet = undefined;
  await Promise.all(extra.splice(0).map((s) => s.stop()));
  await Promise.all(relays.splice(0).map((r) => r.close()));
  await h.close();
});

async function setup(): Promise<{ cp1: SimTalosNode; w1: SimTalosNode }> {
  h = await createHarness({ clock: { now: () => nowMs } });
  fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'cp1', role: 'controlplane' }, { name: 'w1', role: 'worker' }] });
  return { cp1: fleet.machines['cp1']!.sim!, w1: fleet.machines['w1']!.sim! };
}

const clusterRow = async () => (await h.deps.db.select().from(clusters).where(eq(clusters.id, fleet!.clusterId)).get())!;

/** Connections close asynchronously at the far end; wait (bounded) for the count to settle. */
async function connectionsSettle(sim: SimTalosNode, expected: number): Promise<number> {
  for (let i = 0; i < 100 && sim.openConnections !== expected; i++) await new Promise((r) => setTimeout(r, 20));
  return sim.openConnections;
}


interface Relay {
  port: number;
  /** Connections the relay accepted. */
  accepted: number;
  /**
   * Stands for a node that rebooted without closing its connections (power cut, watchdog reset):
   * the connections open now get no FIN; the next segment on one is answered with a TCP reset.
   */
  reboot(): void;
  /** New connections are refused; those open stay as they are. */
  refuse(): void;
  close(): Promise<void>;
}

/** A TCP relay on 127.0.0.1 to `target`'s port. */
async function startRelay(target: SimTalosNode): Promise<Relay> {
  const live = new Map<net.Socket, net.Socket>();
  const every = new Set<net.Socket>();
  const server = net.createServer((client) => {
    relay.accepted++;
    const upstream = net.connect(target.port, target.host);
    live.set(client, upstream);
    for (const s of [client, upstream]) {
      every.add(s);
      s.on('error', () => {});
      s.once('close', () => every.delete(s));
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.once('close', () => {
      live.delete(client);
      upstream.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const closed = new Promise<void>((resolve) => server.once('close', resolve));
  const relay: Relay = {
    port: (server.address() as net.AddressInfo).port,
    accepted: 0,
    reboot() {
      for (const [client, upstream] of live) {
        live.delete(client);
        client.unpipe(upstream);
        upstream.unpipe(client);
        upstream.destroy();
        client.once('data', () => client.resetAndDestroy());
        // unpipe() left it paused.
        client.resume();
      }
    },
    refuse: () => void server.close(),
    close: async () => {
      if (server.listening) server.close();
      for (const s of every) s.destroy();
      await closed;
    },
  };
  return relay;
}

describe('collect keeps mTLS channels to nodes between passes', () => {
  it('makes no new TLS handshake on a second pass, and keeps one connection per node', async () => {
    const { cp1, w1 } = await setup();
    const first = await runCollectPass(h.deps);
    expect(first.states.healthy).toBe(2);
    expect([cp1.handshakes.accepted, w1.handshakes.accepted]).toEqual([1, 1]);

    nowMs += 60_000;
    const second = await runCollectPass(h.deps);
    expect(second.states.healthy).toBe(2);
    expect([cp1.handshakes.accepted, w1.handshakes.accepted]).toEqual([1, 1]);
    // Both passes' calls reached the node over that one connection.
    expect(w1.calls.filter((c) => c.method === 'Version')).toHaveLength(2);
    expect(await connectionsSettle(w1, 1)).toBe(1);
    expect(collectAccessCache(h.deps).channels.size).toBe(2);
  });

  it('reads the Kubernetes API over one kept connection per cluster', async () => {
    await setup();
    const kube = fleet!.kube;
    await runCollectPass(h.deps);
    nowMs += 60_000;
    const second = await runCollectPass(h.deps);
    expect(second.states.healthy).toBe(2);
    // Both passes' reads (version, readyz, nodes, discovery, metrics) over the first pass's one connection.
    for (const path of ['/version', '/readyz?verbose', '/api/v1/nodes', '/apis', '/apis/metrics.k8s.io/v1beta1/nodes']) {
      expect(kube.requests.filter((r) => r === path)).toHaveLength(2);
    }
    expect(kube.handshakes).toBe(1);
  });

  it('dials afresh with new credentials and closes the channels of the old ones', async () => {
    const { cp1, w1 } = await setup();
    await runCollectPass(h.deps);
    // Re-sealing the same secrets stands for a credentials change the nodes still accept.
    const row = await clusterRow();
    const resealed = sealClusterSecrets(h.deps, row.id, openClusterSecrets(h.deps, row));
    await h.deps.db.update(clusters).set({ secretsSealed: resealed }).where(eq(clusters.id, row.id));

    const pass = await runCollectPass(h.deps);
    expect(pass.states.healthy).toBe(2);
    expect([cp1.handshakes.accepted, w1.handshakes.accepted]).toEqual([2, 2]);
    expect(await connectionsSettle(w1, 1)).toBe(1);
    expect(collectAccessCache(h.deps).channels.size).toBe(2);

    // A different CA: the nodes refuse the new client certificate rather than being read over the old channel.
    // A refused node may just hang up; no need to wait the default deadline to see it.
    h.deps.settings.collectDeadlineMs = 1_500;
    const other = await generateSecrets();
    expect(other.certs.os.certPem).not.toBe(openClusterSecrets(h.deps, row).certs.os.certPem);
    await h.deps.db.update(clusters).set({ secretsSealed: sealClusterSecrets(h.deps, row.id, other) }).where(eq(clusters.id, row.id));
    const refused = await runCollectPass(h.deps);
    expect(refused.reached).toBe(0);
    expect(w1.handshakes.accepted).toBe(2);
    expect(w1.handshakes.rejected + cp1.handshakes.rejected).toBeGreaterThan(0);
    // Failed reads do not keep their channels.
    expect(collectAccessCache(h.deps).channels.size).toBe(0);
  });

  it('dials the new address when a machine moves, and closes the idle channel to the old one', async () => {
    const { w1 } = await setup();
    await runCollectPass(h.deps);
    // A second node serving the same machine config, as after a re-IP.
    const row = await clusterRow();
    const secrets = openClusterSecrets(h.deps, row);
    const id = fleet!.machines['w1']!.id;
    const config = await h.call('GET', `/v1/clusters/${row.id}/machines/${id}/config`);
    const moved = await startSimNode({ initialConfig: config.body as string, workerIssuer: { certPem: secrets.certs.os.certPem, keyPem: secrets.certs.os.keyPem } });
    extra.push(moved);
    await h.deps.db.update(machines).set({ address: moved.address }).where(eq(machines.id, id));

    nowMs += 60_000;
    const pass = await runCollectPass(h.deps);
    expect(pass.reached).toBe(2);
    expect(moved.handshakes.accepted).toBe(1);
    expect(w1.handshakes.accepted).toBe(1);
    expect(w1.calls.filter((c) => c.method === 'Version')).toHaveLength(1);

    // The old address is no longer read; once idle long enough its channel goes.
    const cache = collectAccessCache(h.deps);
    expect(cache.channels.size).toBe(3);
    expect(cache.channels.sweep()).toBe(0);
    nowMs += 5 * 60_000 - 1;
    expect(cache.channels.sweep()).toBe(1);
    expect(cache.channels.size).toBe(2);
    expect(await connectionsSettle(w1, 0)).toBe(0);
    expect(moved.openConnections).toBe(1);
  });

  it('reads a node that rebooted without closing its connections over a fresh dial, once', async () => {
    const { w1 } = await setup();
    const relay = await startRelay(w1);
    relays.push(relay);
    const id = fleet!.machines['w1']!.id;
    await h.deps.db.update(machines).set({ address: `127.0.0.1:${relay.port}` }).where(eq(machines.id, id));
    expect((await runCollectPass(h.deps)).reached).toBe(2);
    expect(relay.accepted).toBe(1);

    relay.reboot();
    nowMs += 60_000;
    const pass = await runCollectPass(h.deps);
    expect(pass.reached).toBe(2);
    expect(pass.states.healthy).toBe(2);
    // The kept connection was reset; the read went out again on one new connection.
    expect(relay.accepted).toBe(2);
    expect(w1.handshakes.accepted).toBe(2);
    const row = await h.deps.db.select().from(machineHealth).where(eq(machineHealth.machineId, id)).get();
    expect(row!.lastError).toBeNull();
  });

  it('reports a node reset and refusing afterwards as unreachable with the refusal, without waiting a deadline', async () => {
    const { w1 } = await setup();
    const relay = await startRelay(w1);
    relays.push(relay);
    const id = fleet!.machines['w1']!.id;
    await h.deps.db.update(machines).set({ address: `127.0.0.1:${relay.port}` }).where(eq(machines.id, id));
    await runCollectPass(h.deps);

    // Reset, and its port closed: the fresh dial is refused.
    relay.reboot();
    relay.refuse();
    nowMs += 60_000;
    const pass = await runCollectPass(h.deps);
    expect(pass.states).toMatchObject({ healthy: 1, unreachable: 1 });
    expect(pass.durationMs).toBeLessThan(h.deps.settings.collectDeadlineMs);
    const row = await h.deps.db.select().from(machineHealth).where(eq(machineHealth.machineId, id)).get();
    expect(row!.lastError).toMatch(/connect .*refused/i);
  });
});
