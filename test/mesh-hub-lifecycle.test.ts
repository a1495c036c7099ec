// The runner's side of the hub: at start it re-applies the hub the database holds, at shutdown it
// stops the wireguard-go it started. Real wireguard-go in two network namespaces (root only).
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { describe, expect, it } from 'vitest';
import { createHubDriver } from '../lib/mesh/hub-driver.ts';
import { createMeshHubControl } from '../lib/mesh/hub-sync.ts';
import { loadHub, loadPeer, peerAddresses, peerKeyContext } from '../lib/mesh/store.ts';
import { createHarness, seedCluster } from './support/harness.ts';
import { CHILD, firstLine, inNs } from './support/mesh-netns.ts';
import { createNetnsPair, netnsSkipReason } from './support/netns.ts';

const skip = netnsSkipReason();

describe.skipIf(skip !== null)(`runner lifecycle of the hub${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('resume() re-applies the hub from the database after a restart; stop() ends the wireguard-go it started', async () => {
    const pair = await createNetnsPair();
    const h = await createHarness();
    const node = createHubDriver({ interfaceName: `rzn${pair.tag}l`, commandPrefix: pair.execIn(pair.b) });
    // The runner's own scratch dir, holding a key file a crash left behind.
    const scratchDir = await mkdtemp(join(tmpdir(), 'rz-scratch-'));
    await mkdir(join(scratchDir, 'rzwg-crashed'));
    await writeFile(join(scratchDir, 'rzwg-crashed', 'hub.conf'), '[Interface]\nPrivateKey = left-behind\n');
    const hubDriver = createHubDriver({ interfaceName: `rzh${pair.tag}l`, commandPrefix: pair.execIn(pair.a), scratchDir });
    const sims: ResultPromise[] = [];
    try {
      // Desired state recorded while no hub ran (as before a restart): nothing is up yet.
      const { clusterId } = await seedCluster(h);
      const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'edge1', role: 'worker', provider: 'metal' } });
      expect((await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: `${pair.aAddr}:51820` } })).body.hub.status.state).toBe('not-hosted');
      const linkUp = async () => (await execa('ip', ['-n', pair.a, 'link', 'show', 'dev', `rzh${pair.tag}l`], { reject: false })).exitCode === 0;
      expect(await linkUp()).toBe(false);

      const control = createMeshHubControl(h.deps, hubDriver);
      const resumed = await control.resume();
      expect(resumed).toMatchObject({ state: 'up', mode: 'userspace', missing: [] });
      const hub = (await loadHub(h.deps.db))!;
      const peer = (await loadPeer(h.deps.db, m.body.id as string))!;
      expect(resumed!.interface?.peers.map((p) => p.publicKey)).toEqual([peer.publicKey]);
      // No key file outlives an apply, nor one an earlier crash left.
      expect(await readdir(scratchDir)).toEqual([]);

      // The node dials in and a Talos call crosses the restored hub.
      const addrs = peerAddresses(hub, peer);
      await node.apply({
        privateKey: h.deps.sealer.openText(peer.privateKeySealed, peerKeyContext(peer.machineId)),
        listenPort: 0,
        addresses: [`${addrs.ipv4}/${hub.v4.length}`],
        peers: [{ publicKey: hub.row.publicKey, ipv4: hub.addresses.ipv4, ipv6: hub.addresses.ipv6, endpoint: `${pair.aAddr}:51820` }],
      });
      const sim = inNs(pair.b, CHILD, ['sim', addrs.ipv4]);
      sims.push(sim);
      const { address, fingerprint } = JSON.parse(await firstLine(sim)) as { address: string; fingerprint: string };
      const call = await inNs(pair.a, CHILD, ['call', address, fingerprint]);
      expect(call.exitCode, String(call.stderr)).toBe(0);

      await control.stop();
      expect(await linkUp()).toBe(false);
      // After stop a late PUT does not bring it back in a runner that is shutting down.
      expect((await control.sync()).state).not.toBe('up');
    } finally {
      for (const c of sims) {
        c.stdin?.end();
        c.kill('SIGTERM');
        await c;
      }
      await node.close();
      await rm(scratchDir, { recursive: true, force: true });
      await hubDriver.close();
      await pair.cleanup();
      await h.close();
    }
  }, 40_000);

  it('resume() without a hub in the database runs nothing', async () => {
    const h = await createHarness();
    try {
      const driver = createHubDriver({ interfaceName: 'rzunused0', ipBin: '/nonexistent/ip', wgBin: '/nonexistent/wg' });
      expect(await createMeshHubControl(h.deps, driver).resume()).toBeNull();
    } finally {
      await h.close();
    }
  });
});
