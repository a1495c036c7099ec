import { afterEach } from 'vitest';
import { createTalosClient, type TalosApiClient } from '../lib/talos/api/index.ts';
import { createTestOsCa, issueTestClientCert, startSimNode, testMachineConfig, type SimNodeOptions, type SimTalosNode, type TestCa, type TestKeyPair } from './sim/talos/index.ts';

export interface ConfiguredFixture {
  sim: SimTalosNode;
  ca: TestCa;
  admin: TestKeyPair;
  client: TalosApiClient;
}

/** A sim that starts configured (control plane unless told otherwise) plus an admin client for it. */
export async function configuredNode(opts: SimNodeOptions & { hostname?: string } = {}): Promise<ConfiguredFixture> {
  const ca = await createTestOsCa();
  const sim = await startSimNode({ ...opts, initialConfig: testMachineConfig({ ca, hostname: opts.hostname ?? 'cp-1' }) });
  const admin = await issueTestClientCert(ca);
  const client = createTalosClient({ mode: 'configured', address: sim.address, ca: ca.certPem, cert: admin.certPem, key: admin.keyPem });
  return { sim, ca, admin, client };
}

/** Polls until `fn` succeeds (the node is back from a reboot), bounded by `withinMs`. */
export async function eventually<T>(fn: () => Promise<T>, withinMs = 10_000): Promise<T> {
  const end = Date.now() + withinMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > end) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

export async function expectRejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to fail');
}

/**
 * Returns `track(x)`: whatever a test opens (clients, sim nodes) is closed after it, newest first,
 * so a failed assertion never leaves a listener behind for the next test.
 */
export function closeAfterEach(): <T extends { close(): void } | SimTalosNode>(x: T) => T {
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });
  return (x) => {
    cleanup.push(() => ('stop' in x ? x.stop() : x.close()));
    return x;
  };
}
