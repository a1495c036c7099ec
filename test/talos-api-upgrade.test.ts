import { afterEach, describe, expect, it } from 'vitest';
import { isUnimplemented, TalosApiError, type TalosApiClient } from '../lib/talos/api/index.ts';
import type { SimTalosNode } from './sim/talos/index.ts';
import { configuredNode, eventually, expectRejection } from './talos-api-helpers.ts';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function node(version: string): Promise<{ sim: SimTalosNode; client: TalosApiClient }> {
  const f = await configuredNode({ version, rebootMs: 40 });
  cleanup.push(() => f.sim.stop(), () => f.client.close());
  return f;
}

const IMAGE = 'factory.talos.dev/metal-installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.13.9';

/** What the upgrade code does: the v1.13 API first, the legacy call when the node does not know it. */
async function upgrade(client: TalosApiClient, image: string): Promise<'lifecycle' | 'legacy'> {
  try {
    await client.imagePull({ image });
    await client.lifecycleUpgrade({ image });
    await client.reboot();
    return 'lifecycle';
  } catch (err) {
    if (!isUnimplemented(err)) throw err;
    await client.legacyUpgrade({ image });
    return 'legacy';
  }
}

describe('upgrades', () => {
  it('v1.13 node: image pull into the system namespace, LifecycleService stream, reboot, new version', async () => {
    const { sim, client } = await node('v1.13.2');
    const progress: string[] = [];
    const pulled = await client.imagePull({ image: IMAGE }, { onProgress: (p) => progress.push(p.status) });
    expect(pulled.name).toBe(IMAGE);
    expect(progress).toEqual(['DOWNLOADING', 'EXTRACT_COMPLETE']);
    const messages: string[] = [];
    const res = await client.lifecycleUpgrade({ image: IMAGE }, (m) => messages.push(m));
    expect(res.exitCode).toBe(0);
    expect(messages.length).toBeGreaterThan(0);
    expect(res.messages).toEqual(messages);
    // Installing does not reboot: the version changes only after Reboot.
    expect((await client.version()).tag).toBe('v1.13.2');
    await client.reboot();
    await sim.waitForPhase('down');
    expect((await eventually(() => client.version({ deadlineMs: 1000 }))).tag).toBe('v1.13.9');
    expect(sim.upgrades).toEqual([{ api: 'lifecycle', image: IMAGE, stage: false }]);
  });

  it("the installer's pre-flight refuses a host outside the target's range: in the stream on v1.13, after the ack (and no reboot) on the legacy API", async () => {
    const { sim, client } = await node('v1.15.0');
    await client.imagePull({ image: IMAGE });
    const messages: string[] = [];
    const err = await expectRejection(client.lifecycleUpgrade({ image: IMAGE }, (m) => messages.push(m)));
    expect((err as TalosApiError).code).toBe('node-error');
    expect((err as TalosApiError).message).toMatch(/exit code 1: pre-flight checks failed: host version 1\.15\.0 is too new to downgrade to Talos 1\.13\.9$/);
    expect(messages.some((m) => m.endsWith(' running pre-flight checks'))).toBe(true);
    expect(messages.at(-1)).toBe('pre-flight checks failed: host version 1.15.0 is too new to downgrade to Talos 1.13.9');

    // The legacy API answers before its installer runs: a host in range starts to reboot then, one out of range never does.
    const inRange = await node('v1.12.5');
    await inRange.client.legacyUpgrade({ image: IMAGE });
    expect(inRange.sim.reboots).toEqual(['upgrade']);
    const old = await node('v1.10.5');
    await old.client.legacyUpgrade({ image: IMAGE });
    expect(old.sim.upgrades).toEqual([{ api: 'legacy', image: IMAGE, stage: false }]);
    expect(old.sim.reboots).toEqual([]);
    expect(sim.version).toBe('v1.15.0');
  });

  it('a failed install (image not pulled) surfaces its exit code as node-error', async () => {
    const { client } = await node('v1.13.9');
    const err = await expectRejection(client.lifecycleUpgrade({ image: IMAGE }));
    expect(err).toBeInstanceOf(TalosApiError);
    expect((err as TalosApiError).code).toBe('node-error');
    expect((err as TalosApiError).message).toMatch(/exit code 1/);
  });

  it('v1.12 node answers Unimplemented to the new API; the legacy Upgrade reboots into the new version', async () => {
    const { sim, client } = await node('v1.12.11');
    const pullErr = await expectRejection(client.imagePull({ image: IMAGE }));
    expect(isUnimplemented(pullErr)).toBe(true);
    expect(isUnimplemented(await expectRejection(client.lifecycleUpgrade({ image: IMAGE })))).toBe(true);
    expect(await upgrade(client, IMAGE)).toBe('legacy');
    await sim.waitForPhase('down');
    expect((await eventually(() => client.version({ deadlineMs: 1000 }))).tag).toBe('v1.13.9');
    expect(sim.upgrades.map((u) => u.api)).toEqual(['legacy']);
  });

  it('the fallback helper takes the lifecycle path on v1.13', async () => {
    const { sim, client } = await node('v1.13.0');
    expect(await upgrade(client, IMAGE)).toBe('lifecycle');
    await sim.waitForPhase('down');
    expect((await eventually(() => client.version({ deadlineMs: 1000 }))).tag).toBe('v1.13.9');
    expect(sim.upgrades.map((u) => u.api)).toEqual(['lifecycle']);
  });

  it('a staged legacy upgrade waits for the next reboot', async () => {
    const { sim, client } = await node('v1.12.11');
    const ack = await client.legacyUpgrade({ image: 'ghcr.io/siderolabs/installer:v1.12.12', stage: true });
    expect(ack.ack).toMatch(/Upgrade/);
    expect(sim.reboots).toEqual([]);
    expect((await client.version()).tag).toBe('v1.12.11');
    await client.reboot();
    await sim.waitForPhase('down');
    expect((await eventually(() => client.version({ deadlineMs: 1000 }))).tag).toBe('v1.12.12');
  });
});
