// A real WireGuard tunnel: two network namespaces, wireguard-go in each, the hub applied from the
// database by the same code the runner uses, and a Talos API call from the hub's namespace to a
// Talos sim bound to the node's overlay address. Then the same through the port-pair relay.
import { fileURLToPath } from 'node:url';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHubDriver, type HubDriver } from '../lib/mesh/hub-driver.ts';
import { createMeshHubControl } from '../lib/mesh/hub-sync.ts';
import { loadClusterMesh, loadHub, loadPeer, nodeEndpoint, peerAddresses, peerKeyContext } from '../lib/mesh/store.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';
import { createNetnsPair, netnsSkipReason, type NetnsPair } from './support/netns.ts';
import { CHILD, firstLine, inNs } from './support/mesh-netns.ts';

const skip = netnsSkipReason();
const RELAY = fileURLToPath(new URL('../lib/mesh/relay-main.ts', import.meta.url));

describe.skipIf(skip !== null)(`mesh tunnel between network namespaces${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let pair: NetnsPair;
  let h: Harness;
  const drivers: HubDriver[] = [];
  const children: ResultPromise[] = [];

  beforeAll(async () => {
    pair = await createNetnsPair();
    h = await createHarness();
  }, 20_000);

  afterAll(async () => {
    for (const c of children) {
      c.stdin?.end();
      c.kill('SIGTERM');
      await c;
    }
    for (const d of drivers) await d.close();
    await pair?.cleanup();
    await h?.close();
  }, 20_000);

  async function joinNode(machineId: string, tag: string): Promise<{ ipv4: string; driver: HubDriver }> {
    const hub = (await loadHub(h.deps.db))!;
    const peer = (await loadPeer(h.deps.db, machineId))!;
    const cluster = (await loadClusterMesh(h.deps.db, peer.clusterId))!;
    const addrs = peerAddresses(hub, peer);
    // The node side stands in for Talos applying its WireguardConfig: same key, addresses, one hub peer.
    const node = createHubDriver({ interfaceName: `rzn${pair.tag}${tag}`, commandPrefix: pair.execIn(pair.b) });
    drivers.push(node);
    await node.apply({
      privateKey: h.deps.sealer.openText(peer.privateKeySealed, peerKeyContext(machineId)),
      listenPort: 0,
      addresses: [`${addrs.ipv4}/32`],
      peers: [{ publicKey: hub.row.publicKey, ipv4: hub.addresses.ipv4, ipv6: hub.addresses.ipv6, endpoint: nodeEndpoint(cluster, peer) }],
    });
    // /32 plus a host route keeps the two test nodes' links from claiming the same prefix in one namespace.
    await execa('ip', ['-n', pair.b, 'route', 'replace', `${hub.addresses.ipv4}/32`, 'dev', `rzn${pair.tag}${tag}`]);
    return { ipv4: addrs.ipv4, driver: node };
  }

  async function talosCallOverMesh(nodeIpv4: string): Promise<string> {
    const sim = inNs(pair.b, CHILD, ['sim', nodeIpv4]);
    children.push(sim);
    const { address, fingerprint } = JSON.parse(await firstLine(sim)) as { address: string; fingerprint: string };
    expect(address.startsWith(`${nodeIpv4}:`)).toBe(true);
    const call = await inNs(pair.a, CHILD, ['call', address, fingerprint]);
    expect(call.exitCode, String(call.stderr)).toBe(0);
    return (JSON.parse(String(call.stdout)) as { tag: string }).tag;
  }

  it('handshakes and carries a Talos API call to the node overlay address; GET shows the peer', async () => {
    const hubDriver = createHubDriver({ interfaceName: `rzh${pair.tag}`, commandPrefix: pair.execIn(pair.a) });
    drivers.push(hubDriver);
    h.deps.meshHub = createMeshHubControl(h.deps, hubDriver);
    const { clusterId } = await seedCluster(h);
    const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'edge1', role: 'worker', provider: 'metal' } });
    const on = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: `${pair.aAddr}:51820` } });
    expect(on.status).toBe(200);
    expect(on.body.hub.status).toMatchObject({ state: 'up', mode: 'userspace', missing: [] });

    const { ipv4 } = await joinNode(m.body.id as string, 'd');
    expect(await talosCallOverMesh(ipv4)).toBe('v1.13.9');

    const got = await h.call('GET', `/v1/clusters/${clusterId}/mesh`);
    const peer = got.body.peers[0];
    expect(peer.name).toBe('edge1');
    expect(peer.latestHandshake).not.toBeNull();
    expect(peer.endpoint).toMatch(new RegExp(`^${pair.bAddr.replace(/\./g, '\\.')}:\\d+$`));
    expect(peer.rxBytes).toBeGreaterThan(0);
    expect(peer.txBytes).toBeGreaterThan(0);
  }, 40_000);

  it('the same through the port-pair relay: the node dials the relay, the hub sees the relay as the peer', async () => {
    const nodePortBase = 52000;
    const hubPortBase = 53000;
    const relay = inNs(pair.a, RELAY, [pair.aAddr, String(nodePortBase), String(hubPortBase), '2', '9']);
    children.push(relay);
    await firstLine(relay);
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'relayed' } });
    const cl = await h.call('POST', '/v1/clusters', { body: { tenant: t.body.id, name: 'c2', endpoint: 'https://[2001:db8::2]:6443' } });
    const m = await h.call('POST', `/v1/clusters/${cl.body.id}/machines`, { body: { name: 'far1', role: 'worker', provider: 'metal' } });
    const on = await h.call('PUT', `/v1/clusters/${cl.body.id}/mesh`, { body: { relay: { address: pair.aAddr, nodePortBase, hubPortBase } } });
    expect(on.status).toBe(200);
    const index = Number((on.body.peers[0].ipv4 as string).split('.')[3]);
    expect(on.body.peers[0].dials).toBe(`${pair.aAddr}:${nodePortBase + index}`);

    const { ipv4 } = await joinNode(m.body.id as string, 'r');
    expect(await talosCallOverMesh(ipv4)).toBe('v1.13.9');
    const got = await h.call('GET', `/v1/clusters/${cl.body.id}/mesh`);
    expect(got.body.peers[0].latestHandshake).not.toBeNull();
    // The hub's peer endpoint is the relay's hub-facing port, not the node's own address.
    expect(got.body.peers[0].endpoint).toBe(`${pair.aAddr}:${hubPortBase + index}`);
  }, 40_000);
});
