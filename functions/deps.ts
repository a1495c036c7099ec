import type { Database, Db } from '../db/client.ts';
import type { Clock } from '../lib/clock.ts';
import { createSealer, type Sealer } from '../lib/crypto/seal.ts';
import type { ExecutorRegistry } from '../lib/jobs/executor.ts';
import { createRunBus, type RunBus } from '../lib/jobs/bus.ts';
import { createJobs, type Jobs } from '../lib/jobs/queue.ts';
import type { Logger } from '../lib/log.ts';
import type { Scope } from '../lib/auth/tokens.ts';
import { createHttpMetrics, type HttpMetrics } from './ops/http-metrics.ts';
import type { ClusterSecrets } from '../lib/talos/secrets.ts';
import type { UpgradeTimings } from './upgrade/timings.ts';
import type { MeshHubControl } from '../lib/mesh/control.ts';

/** What handlers and executors need from the host; tests build their own. */
export interface Settings {
  dataDir: string;
  /** Admin token given by the environment (compared in constant time), if any. */
  adminToken?: string;
  collectCron: string;
  /** Nodes (and Kubernetes APIs) a collect pass reads at once. */
  collectConcurrency: number;
  /** Deadline of each Talos call and of each cluster's whole Kubernetes read, in ms. */
  collectDeadlineMs: number;
  /** How long raw health samples are kept before they are folded into hourly aggregates. */
  retentionRawS: number;
  /** Poll interval for run event followers (SSE) in ms. */
  followPollMs: number;
  /** A quiet event stream sends a comment this often, so proxies keep it open. */
  keepAliveMs: number;
  tofu: {
    /** REZUS_TOFU_BIN, else tofu, else terraform on pathEnv. */
    bin?: string;
    pathEnv: string;
    /** How tofu on this machine reaches the state backend: the runner's own listener. */
    selfUrl: string;
    /** After SIGINT, how long tofu gets to release its lock and write state before SIGKILL. */
    cancelGraceMs: number;
    /** tofu's -lock-timeout, e.g. `30s`. */
    lockTimeout?: string;
  };
  /** Overrides of the upgrade timeouts and poll intervals (defaults in functions/upgrade/timings.ts). */
  upgrade?: Partial<UpgradeTimings>;
  /**
   * Home Assistant add-on: requests from the Supervisor's ingress proxy carrying X-Ingress-Path
   * are the admin without a login. Off unless the runner is configured for the add-on.
   */
  trustIngress?: boolean;
  /** Talos push-config and bootstrap timings; absent fields take the defaults in functions/push-config/timings.ts. */
  pushConfig?: Partial<PushTimings>;
}

export interface PushTimings {
  /** Deadline of each Talos API call. */
  callDeadlineMs: number;
  /** How long a pushed node may take to install, reboot and answer over mTLS. */
  readyTimeoutMs: number;
  /** Pause between readiness probes (and bootstrap retries). */
  pollMs: number;
}

export interface Deps {
  database: Database;
  db: Db;
  jobs: Jobs;
  bus: RunBus;
  sealer: Sealer;
  clock: Clock;
  log: Logger;
  settings: Settings;
  metrics: HttpMetrics;
  /** Mints a new cluster's secrets (CAs, keys, tokens); RSA-4096 makes this the slow part of creating a cluster. */
  newClusterSecrets(): Promise<ClusterSecrets>;
  /** The WireGuard hub on this host, when it runs one (the Node runner); absent on Workers. */
  meshHub?: MeshHubControl;
}

export type AppExecutors = ExecutorRegistry<Deps>;

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
  clock: Clock;
  log: Logger;
  settings: Settings;
  newClusterSecrets(): Promise<ClusterSecrets>;
}): Deps {
  const bus = createRunBus();
  return {
    database: parts.database,
    db: parts.database.db,
    jobs: createJobs({ db: parts.database.db, clock: parts.clock, bus }),
    bus,
    sealer: createSealer(parts.masterKey),
    clock: parts.clock,
    log: parts.log,
    settings: parts.settings,
    metrics: createHttpMetrics(),
    newClusterSecrets: parts.newClusterSecrets,
  };
}
