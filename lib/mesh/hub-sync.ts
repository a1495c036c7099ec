// Node-only: builds the hub's desired config from the database and applies it with the driver.
import type { Db } from '../../db/client.ts';
import { meshClusters } from '../../db/schema/index.ts';
import type { Sealer } from '../crypto/seal.ts';
import type { MeshHubControl } from './control.ts';
import type { HubApplyInput, HubDriver, HubStatus } from './hub-driver.ts';
import { HubUnavailableError } from './hub-driver.ts';
import { hubPrivateKey, hubSideEndpoint, listAllPeers, loadHub, peerAddresses } from './store.ts';

export async function desiredHub(deps: { db: Db; sealer: Sealer }): Promise<HubApplyInput | null> {
  const hub = await loadHub(deps.db);
  if (!hub) return null;
  const clusters = new Map((await deps.db.select().from(meshClusters).all()).map((c) => [c.clusterId, c]));
  const peers = (await listAllPeers(deps.db)).filter((p) => clusters.has(p.clusterId));
  return {
    privateKey: hubPrivateKey(deps, hub),
    listenPort: hub.row.listenPort,
    addresses: [`${hub.addresses.ipv4}/${hub.v4.length}`, `${hub.addresses.ipv6}/${hub.v6.length}`],
    peers: peers.map((p) => ({ publicKey: p.publicKey, ...peerAddresses(hub, p), endpoint: hubSideEndpoint(clusters.get(p.clusterId)!, p) })),
  };
}

/** What the runner adds to the routes' control: its own start and stop. */
export interface RunnerMeshHub extends MeshHubControl {
  /** At start: re-applies the hub the database holds (interface, key, peers); null when there is none. */
  resume(): Promise<HubStatus | null>;
  /** At shutdown: stops the wireguard-go process this runner started (a kernel interface stays). */
  stop(): Promise<void>;
}

export function createMeshHubControl(deps: { db: Db; sealer: Sealer }, driver: HubDriver): RunnerMeshHub {
  // One change at a time: a PUT racing the start-up resume must not create the interface twice.
  let queue: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = queue.then(fn, fn);
    queue = next.catch(() => undefined);
    return next;
  };
  let stopped = false;
  const apply = async (want: HubApplyInput): Promise<HubStatus> => {
    try {
      await driver.apply(want);
    } catch (err) {
      if (err instanceof HubUnavailableError) return { state: 'unavailable', mode: null, missing: err.missing, interface: null };
      throw err;
    }
    return driver.status();
  };
  return {
    sync: () =>
      serial(async () => {
        const want = await desiredHub(deps);
        return want && !stopped ? apply(want) : driver.status();
      }),
    status: () => driver.status(),
    resume: () =>
      serial(async () => {
        const want = await desiredHub(deps);
        return want && !stopped ? apply(want) : null;
      }),
    stop: () =>
      serial(async () => {
        stopped = true;
        await driver.stopUserspace();
      }),
  };
}
