import { execa } from 'execa';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../db/client.ts';
import { machines, meshClusters, meshHub, meshPeers } from '../db/schema/index.ts';
import { isWireguardKey, generateKeyPair, publicKeyOf } from '../lib/mesh/keys.ts';
import { parseWgDump, renderHubConfig } from '../lib/mesh/hub-config.ts';
import { affectedMachines, allocatePeer, ensureHub, markDelivered, peerAddresses, setClusterMesh } from '../lib/mesh/store.ts';
import { nodeWireguardDocument } from '../lib/mesh/talos-doc.ts';
import { createSealer } from '../lib/crypto/seal.ts';
import { renderMachineConfig, TalosConfigError } from '../lib/talos/config.ts';
import { validateConfigDocuments } from '../lib/talos/schema.ts';
import { createHarness, seedCluster, sharedSecrets, type Harness } from './support/harness.ts';

describe('keys', () => {
  it('generates WireGuard keys that wg agrees with', async () => {
    const k = generateKeyPair();
    expect(isWireguardKey(k.privateKey) && isWireguardKey(k.publicKey)).toBe(true);
    const { stdout } = await execa('wg', ['pubkey'], { input: `${k.privateKey}\n` });
    expect(stdout.trim()).toBe(k.publicKey);
    expect(publicKeyOf(k.privateKey)).toBe(k.publicKey);
    const { stdout: genkey } = await execa('wg', ['genkey']);
    const { stdout: pub } = await execa('wg', ['pubkey'], { input: genkey });
    expect(publicKeyOf(genkey.trim())).toBe(pub.trim());
    expect(() => publicKeyOf('bm90IGEga2V5')).toThrow(/32 bytes/);
    expect(isWireguardKey(k.privateKey.slice(1))).toBe(false);
  });
});

describe('hub config and wg dump', () => {
  it('renders one peer per node with its /32 and /128 and no endpoint, in a stable order', () => {
    const a = generateKeyPair().publicKey;
    const b = generateKeyPair().publicKey;
    const peers = [
      { publicKey: a, ipv4: '100.64.0.2', ipv6: 'fd00::2' },
      { publicKey: b, ipv4: '100.64.0.3', ipv6: 'fd00::3' },
    ];
    const text = renderHubConfig({ privateKey: generateKeyPair().privateKey, listenPort: 51820, peers });
    expect(text.match(/\[Peer\]/g)).toHaveLength(2);
    expect(text).toContain(`PublicKey = ${a}\nAllowedIPs = 100.64.0.2/32, fd00::2/128`);
    expect(text).not.toContain('Endpoint');
    const again = renderHubConfig({ privateKey: text.split('\n')[1]!.slice(13), listenPort: 51820, peers: [...peers].reverse() });
    expect(again).toBe(text);
  });

  it('parses wg show dump', () => {
    const dump = 'PRIV\tPUB\t51820\toff\nPEER1\t(none)\t198.51.100.2:4000\t100.64.0.2/32,fd00::2/128\t1796293786\t180\t92\toff\nPEER2\t(none)\t(none)\t100.64.0.3/32\t0\t0\t0\t25\n';
    const s = parseWgDump(dump);
    expect(s.listenPort).toBe(51820);
    expect(JSON.stringify(s)).not.toContain('PRIV');
    expect(s.peers[0]).toEqual({ publicKey: 'PEER1', endpoint: '198.51.100.2:4000', allowedIps: ['100.64.0.2/32', 'fd00::2/128'], latestHandshake: 1796293786000, rxBytes: 180, txBytes: 92, persistentKeepalive: null });
    expect(s.peers[1]).toMatchObject({ endpoint: null, latestHandshake: null, persistentKeepalive: 25 });
  });
});

describe('node WireguardConfig document', () => {
  const hubKey = generateKeyPair();
  const nodeKey = generateKeyPair();
  const doc = nodeWireguardDocument({
    privateKey: nodeKey.privateKey, ipv4: '100.64.0.5', ipv6: 'fd7a:7265:7a75::5', ipv4PrefixLength: 10, ipv6PrefixLength: 64,
    hubPublicKey: hubKey.publicKey, hubIpv4: '100.64.0.1', hubIpv6: 'fd7a:7265:7a75::1', endpoint: '203.0.113.7:51820',
  });

  it('is schema-valid inside a whole machine config and renders deterministically', async () => {
    const input = { secrets: await sharedSecrets(), clusterName: 'c1', endpoint: 'https://[2001:db8::1]:6443', role: 'worker' as const, installDisk: '/dev/sda', extraDocuments: [doc] };
    const yaml = renderMachineConfig(input);
    expect(validateConfigDocuments(yaml)).toEqual([]);
    expect(renderMachineConfig(input)).toBe(yaml);
    expect(yaml).toContain('kind: WireguardConfig');
    expect(yaml).toContain('persistentKeepaliveInterval: 25s');
    expect(yaml).toContain('- 100.64.0.1/32');
    expect(yaml).toContain('address: 100.64.0.5/10');
  });

  it('a hostname endpoint or a broken key is refused by the schema', async () => {
    const bad = structuredClone(doc) as { peers: { endpoint: string }[] };
    bad.peers[0]!.endpoint = 'hub.example.net:51820';
    const input = { secrets: await sharedSecrets(), clusterName: 'c1', endpoint: 'https://[2001:db8::1]:6443', role: 'worker' as const, installDisk: '/dev/sda', extraDocuments: [bad] };
    expect(() => renderMachineConfig(input)).toThrow(TalosConfigError);
    expect(() => renderMachineConfig(input)).toThrow(/WireguardConfig\/rzmesh0\.peers\[0\]\.endpoint/);
  });
});

describe('allocation', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await createHarness();
  });
  afterEach(async () => h.close());

  async function addMachines(clusterId: string, n: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: `m${i}`, role: 'worker', provider: 'metal' } });
      ids.push(r.body.id as string);
    }
    return ids;
  }

  it('gives unique, stable addresses under concurrent allocation from two database connections', async () => {
    const { clusterId } = await seedCluster(h);
    const ids = await addMachines(clusterId, 24);
    const second = await openDatabase({ url: `file:${h.dbFile}` });
    try {
      const sealer = createSealer(h.masterKey);
      const depsA = { db: h.deps.db, sealer, clock: h.deps.clock };
      const depsB = { db: second.db, sealer, clock: h.deps.clock };
      const hub = await ensureHub(depsA, { ipv6Prefix: 'fd7a:7265:7a75::/64' });
      // Every machine asked for twice, from both connections at once.
      const rows = await Promise.all(ids.flatMap((id, i) => [allocatePeer(i % 2 ? depsA : depsB, hub, clusterId, id), allocatePeer(i % 2 ? depsB : depsA, hub, clusterId, id)]));
      const byMachine = new Map<string, number>();
      for (const r of rows) {
        const seen = byMachine.get(r.machineId);
        if (seen !== undefined) expect(r.hostIndex).toBe(seen);
        byMachine.set(r.machineId, r.hostIndex);
      }
      const indexes = [...byMachine.values()].sort((a, b) => a - b);
      expect(new Set(indexes).size).toBe(24);
      expect(indexes[0]).toBe(2); // 1 is the hub
      expect(indexes.at(-1)).toBe(25);
      // After a "restart" (a fresh connection and hub load) the same machine keeps its address.
      const hubAgain = await ensureHub(depsB);
      const again = await allocatePeer(depsB, hubAgain, clusterId, ids[3]!);
      expect(peerAddresses(hubAgain, again)).toEqual(peerAddresses(hub, { hostIndex: byMachine.get(ids[3]!)! }));
      // A freed index is reused only once its machine is gone.
      const freed = byMachine.get(ids[0]!)!;
      await h.call('DELETE', `/v1/clusters/${clusterId}/machines/${ids[0]}`);
      const [extra] = await addMachines(clusterId, 1).then(() => h.deps.db.select().from(machines).all()).then((all) => all.filter((m) => !ids.includes(m.id)).map((m) => m.id));
      expect((await allocatePeer(depsA, hub, clusterId, extra!)).hostIndex).toBe(freed);
      await expect(ensureHub(depsA, { ipv4Prefix: '10.77.0.0/16' })).rejects.toThrow(/already exists/);
    } finally {
      second.close();
    }
  });

  it('PUT turns the mesh on, GET shows peers, bad input is a 4xx that changes nothing, endpoint moves list affected nodes', async () => {
    const { clusterId } = await seedCluster(h);
    const ids = await addMachines(clusterId, 3);
    for (const body of [{ endpoint: 'hub.example.net:51820' }, {}, { endpoint: '203.0.113.7:51820', ipv4Prefix: '100.64.0.1/10' }, { endpoint: '203.0.113.7:51820', extra: 1 }]) {
      const bad = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body });
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe('invalid_request');
    }
    expect((await h.call('GET', `/v1/clusters/${clusterId}/mesh`)).body.enabled).toBe(false);

    const on = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820' } });
    expect(on.status).toBe(200);
    expect(on.body.enabled).toBe(true);
    expect(on.body.hub.status.state).toBe('not-hosted');
    expect(on.body.hub.ipv4).toBe('100.64.0.1');
    expect(on.body.hub.ipv6Prefix).toMatch(/^fd[0-9a-f]{2}:/);
    const got = await h.call('GET', `/v1/clusters/${clusterId}/mesh`);
    expect(got.body.peers.map((p: { name: string; ipv4: string; dials: string; latestHandshake: null }) => [p.name, p.ipv4, p.dials, p.latestHandshake])).toEqual([
      ['m0', '100.64.0.2', '203.0.113.7:51820', null],
      ['m1', '100.64.0.3', '203.0.113.7:51820', null],
      ['m2', '100.64.0.4', '203.0.113.7:51820', null],
    ]);
    expect(JSON.stringify(got.body)).not.toMatch(/privateKey|private_key_sealed/i);

    // m0 and m1 got configs with the old endpoint; the hub's address moves.
    await markDelivered(h.deps.db, ids[0]!, '203.0.113.7:51820');
    await markDelivered(h.deps.db, ids[1]!, '203.0.113.7:51820');
    expect(await affectedMachines(h.deps.db, clusterId)).toEqual([]);
    await setClusterMesh(h.deps, clusterId, { endpoint: '203.0.113.9:51820', endpointSource: 'stun', relay: null });
    expect((await affectedMachines(h.deps.db, clusterId)).map((a) => [a.machineId, a.wanted])).toEqual([
      [ids[0], '203.0.113.9:51820'],
      [ids[1], '203.0.113.9:51820'],
    ]);
    const other = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820', ipv4Prefix: '10.77.0.0/16' } });
    expect(other.status).toBe(409);
  });
});

describe('the shared hub\'s prefixes', () => {
  it('only an admin sets them, and a prefix too small for the cluster is refused before anything is written', async () => {
    const h = await createHarness();
    try {
      const { tenantId, clusterId } = await seedCluster(h);
      for (let i = 0; i < 3; i++) {
        await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: `m${i}`, role: 'worker', provider: 'metal', address: `192.0.2.${10 + i}` } });
      }
      const token = (await h.call('POST', `/v1/tenants/${tenantId}/tokens`, { body: { name: 'ops' } })).body.token as string;
      const asTenant = await h.app.request(`/v1/clusters/${clusterId}/mesh`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ endpoint: '203.0.113.7:51820', ipv4Prefix: '192.168.1.0/24' }),
      });
      expect(asTenant.status).toBe(403);
      const nothing = async () => ({
        hub: await h.deps.db.select().from(meshHub).all(),
        clusters: await h.deps.db.select().from(meshClusters).all(),
        peers: await h.deps.db.select().from(meshPeers).all(),
      });
      expect(await nothing()).toEqual({ hub: [], clusters: [], peers: [] });
      // A /30 holds the hub and one node: three machines do not fit.
      const small = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820', ipv4Prefix: '192.168.1.0/30' } });
      expect(small.status).toBe(409);
      expect(small.body.error.code).toBe('mesh_exhausted');
      expect(small.body.error.message).toMatch(/room for 1 more node\(s\); this cluster needs 3/);
      expect(await nothing()).toEqual({ hub: [], clusters: [], peers: [] });
      // What nodes could never use is refused before anything is written.
      const bad: Array<[Record<string, unknown>, RegExp]> = [
        [{ endpoint: '127.0.0.1:51820' }, /loopback address/],
        [{ endpoint: '0.0.0.0:51820' }, /unspecified address/],
        [{ endpoint: '[ff02::1]:51820' }, /multicast address/],
        [{ endpoint: '255.255.255.255:51820' }, /reserved or broadcast address/],
        [{ endpoint: '[fe80::1]:51820' }, /link-local address/],
        [{ endpoint: '203.0.113.7:51820', ipv4Prefix: '127.0.0.0/8' }, /overlaps the loopback range/],
        [{ endpoint: '203.0.113.7:51820', ipv6Prefix: 'fe80::/64' }, /overlaps the link-local range/],
        [{ relay: { address: '::1', nodePortBase: 52000, hubPortBase: 53000 } }, /loopback address/],
        [{ relay: { address: '198.51.100.4', nodePortBase: 65535, hubPortBase: 53000 } }, /at most 65531/],
        [{ relay: { address: '198.51.100.4', nodePortBase: 52000, hubPortBase: 52002 } }, /ranges overlap/],
      ];
      for (const [body, why] of bad) {
        const res = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { ...body, ipv4Prefix: (body.ipv4Prefix as string | undefined) ?? '192.168.1.0/29' } });
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(JSON.stringify(res.body.error), JSON.stringify(res.body.error)).toMatch(why);
      }
      expect(await nothing()).toEqual({ hub: [], clusters: [], peers: [] });
      const fits = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820', ipv4Prefix: '192.168.1.0/29' } });
      expect(fits.status).toBe(200);
      expect(fits.body.peers.map((p: { ipv4: string }) => p.ipv4)).toEqual(['192.168.1.2', '192.168.1.3', '192.168.1.4']);

      // Nodes that got a config dial their relay port: moving the ports re-pushes them.
      const relayed = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { relay: { address: '198.51.100.4', nodePortBase: 52000, hubPortBase: 53000 } } });
      expect(relayed.status).toBe(200);
      const first = (await h.deps.db.select().from(meshPeers).all()).find((p) => p.hostIndex === 2)!;
      await markDelivered(h.deps.db, first.machineId, '198.51.100.4:52002');
      const moved = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { relay: { address: '198.51.100.4', nodePortBase: 54000, hubPortBase: 55000 } } });
      expect(moved.status).toBe(200);
      expect(moved.body.repush.run).toMatch(/^run_/);
      expect(moved.body.repush.machines).toBe(1);
    } finally {
      await h.close();
    }
  });
});

describe('dial address and node documents', () => {
  it('dials the overlay address once the mesh is on, and renders the node document from the database', async () => {
    const h = await createHarness();
    try {
      const { dialAddress, meshDocuments } = await import('../lib/mesh/dial.ts');
      const { clusterId } = await seedCluster(h);
      const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'n1', role: 'worker', provider: 'metal', address: '192.0.2.10' } });
      expect(await dialAddress(h.deps.db, m.body.id, '192.0.2.10')).toBe('192.0.2.10');
      expect(await meshDocuments(h.deps, m.body.id)).toEqual([]);
      await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '[2001:DB8::7]:51820' } });
      // Not on the overlay until a config with the mesh document has reached it.
      expect(await dialAddress(h.deps.db, m.body.id, '192.0.2.10')).toBe('192.0.2.10');
      await markDelivered(h.deps.db, m.body.id, '[2001:db8::7]:51820');
      expect(await dialAddress(h.deps.db, m.body.id, '192.0.2.10')).toBe('100.64.0.2');
      const [doc] = await meshDocuments(h.deps, m.body.id);
      expect(doc).toMatchObject({ kind: 'WireguardConfig', peers: [{ endpoint: '[2001:db8::7]:51820', persistentKeepaliveInterval: '25s' }] });
      const yaml = renderMachineConfig({ secrets: await sharedSecrets(), clusterName: 'c1', endpoint: 'https://[2001:db8::1]:6443', role: 'worker', installDisk: '/dev/sda', extraDocuments: [doc!] });
      expect(validateConfigDocuments(yaml)).toEqual([]);
      await h.call('DELETE', `/v1/clusters/${clusterId}/mesh`);
      expect(await dialAddress(h.deps.db, m.body.id, '192.0.2.10')).toBe('192.0.2.10');
    } finally {
      await h.close();
    }
  });
});
