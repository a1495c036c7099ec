import { eq } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { clusters, machines } from '../db/schema/index.ts';
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

afterEach(async () => {
  await fleet?.stop();
  fleet = undefined;
  await Promise.all(extra.splice(0).map((s) => s.stop()));
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
});
