import type { BackupFiles } from './backup/files.ts';
// What every handler finds in its context: the host's parts (database, queue, clock, settings)
// and the caller. The runner, the Worker and the tests assemble their own.
import type { Database, Db } from '../db/client.ts';
import type { Clock } from '../lib/clock.ts';
import { createSealer, type Sealer } from '../lib/crypto/seal.ts';
import { createRunBus, type RunBus } from '../lib/jobs/bus.ts';
import { createJobs, type Jobs } from '../lib/jobs/queue.ts';
import type { Logger } from '../lib/log.ts';
import type { Scope } from '../lib/auth/tokens.ts';
import { noMetrics, type Metrics } from './ops/http-metrics.ts';
import type { ClusterSecrets } from '../lib/talos/secrets.ts';
import type { MeshHubControl } from '../lib/mesh/control.ts';
import type { Settings } from './settings.ts';

export type { Settings, PushTimings, UpgradeTimings } from './settings.ts';

export interface Deps {
  /** The WireGuard hub on this host, when it runs one (the Node runner); absent on Workers. */
  meshHub?: MeshHubControl;
  database: Database;
  db: Db;
  jobs: Jobs;
  bus: RunBus;
  sealer: Sealer;
  /**
   * Seals webhook secrets only, under the edge key (REZUS_EDGE_KEY) that home and the Worker share;
   * absent when no edge is configured. See functions/webhooks/secret.ts.
   */
  webhookSealer?: Sealer;
  clock: Clock;
  log: Logger;
  settings: Settings;
  metrics: Metrics;
  /** Mints a new cluster's secrets (CAs, keys, tokens); RSA-4096 makes this the slow part of creating a cluster. */
  newClusterSecrets(): Promise<ClusterSecrets>;
  /** The backup files, where the host keeps them (the runner does). */
  backups?: BackupFiles;
}

export interface Principal {
  tokenId: string;
  /** null for the admin. */
  tenantId: string | null;
  scopes: Scope[];
  admin: boolean;
}

export interface AppEnv {
  Variables: {
    deps: Deps;
    principal: Principal;
  };
}

/** Wires the parts every host shares (queue, bus, sealer, metrics) around a database and settings. */
export function assembleDeps(parts: {
  database: Database;
  masterKey: Uint8Array;
  /** REZUS_EDGE_KEY: lets home seal webhook secrets for a Worker as well. */
  edgeKey?: Uint8Array;
  clock: Clock;
  log: Logger;
  settings: Settings;
  newClusterSecrets(): Promise<ClusterSecrets>;
  /** The runner's prom-client metrics; without them /metrics says it is served at home. */
  metrics?: Metrics;
  backups?: BackupFiles;
}): Deps {
  const bus = createRunBus();
  return {
    database: parts.database,
    db: parts.database.db,
    jobs: createJobs({ db: parts.database.db, clock: parts.clock, bus }),
    bus,
    sealer: createSealer(parts.masterKey),
    ...(parts.edgeKey ? { webhookSealer: createSealer(parts.edgeKey) } : {}),
    clock: parts.clock,
    log: parts.log,
    settings: parts.settings,
    metrics: parts.metrics ?? noMetrics,
    newClusterSecrets: parts.newClusterSecrets,
    ...(parts.backups ? { backups: parts.backups } : {}),
  };
}
