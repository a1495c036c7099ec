import { join } from 'node:path';
import { nodeBackupFiles } from './backup-files.ts';
import { serve, type ServerType } from '@hono/node-server';
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { localWorkerId } from './lease-owner.ts';
import { openDatabase, runMigrations } from '../db/client.ts';
import { createApp, mountRoutesNow, type AppOptions } from '../functions/app.ts';
import { assembleDeps, type Deps } from '../functions/context.ts';
import type { AppExecutors } from './jobs/registry.ts';
import { clearRunFiles, closeExecutors, cronJobs, executors, onRunsInterrupted } from './jobs/registry.ts';
import { removeStaleRunFiles } from '../lib/tofu/run-files.ts';
import { isTerminal } from '../lib/jobs/types.ts';
import { removePartialBackups } from './jobs/backup/executor.ts';
import { systemClock } from '../lib/clock.ts';
import { loadMasterKey } from '../lib/crypto/master-key.ts';
import { parseKey32 } from '../lib/crypto/key-text.ts';
import { createLogger } from '../lib/log.ts';
import { errorMessage } from '../lib/errors.ts';
import { ensureAdminToken } from './admin-token.ts';
import type { RunnerConfig } from './config.ts';
import type { RunnerMeshHub } from '../lib/mesh/hub-sync.ts';
import { DEFAULT_INTERFACE, loadHub } from '../lib/mesh/store.ts';
import { deferredMetrics } from './deferred-metrics.ts';
import { idleGc } from './idle-gc.ts';
import { nodeRemoteAddress } from './remote-address.ts';
import { createWorker } from './worker.ts';

// What the start leaves out (prom-client, the routes other than the probes) is loaded this long
// after it, unless a scrape or a request needs it sooner: out of the way of the start, soon enough
// that the process metrics miss little, the first API request does not wait, and idle memory
// includes it all.
const WARM_UP_AFTER_MS = 1_000;
// Runs queued back to back (a cron tick's, a retry) start within this: no GC between them.
const GC_AFTER_RUNS_MS = 1_000;

export interface Host {
  url: string;
  port: number;
  deps: Deps;
  stop(): Promise<void>;
}

/** Starts everything the runner hosts: database, HTTP, worker, cron. */
export interface HostOptions {
  app?: AppOptions;
  /** Replaces the registry's executors (tests wrap them to hold a run at a known point). */
  executors?: AppExecutors;
}

export async function startHost(
  config: RunnerConfig,
  print: (line: string) => void = console.log,
  opts: HostOptions = {},
): Promise<Host> {
  const log = createLogger(config.logLevel);
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const masterKey = await loadMasterKey(config.dataDir, config.masterKey);
  const edgeKey = config.edgeKey ? parseKey32(config.edgeKey, 'REZUS_EDGE_KEY') : undefined;
  if (edgeKey?.equals(masterKey)) throw new Error('REZUS_EDGE_KEY must differ from the master key: the edge holds it');
  const database = await openDatabase({ url: config.dbUrl, authToken: config.dbAuthToken });
  await runMigrations(database);
  const clock = systemClock;
  if (!config.adminToken) await ensureAdminToken(database.db, config.dataDir, clock.now(), print);

  const metrics = deferredMetrics(async () => (await import('./metrics.ts')).createPromMetrics(() => deps), {
    loadAfterMs: WARM_UP_AFTER_MS,
    onError: (err) => log.error('metrics not loaded', { error: errorMessage(err) }),
  });
  const deps: Deps = assembleDeps({
    database,
    masterKey,
    edgeKey,
    clock,
    log,
    settings: {
      dataDir: config.dataDir,
      adminToken: config.adminToken,
      collectCron: config.collectCron,
      ...(config.etcdSnapshotCron ? { etcdSnapshotCron: config.etcdSnapshotCron } : {}),
      etcdSnapshotKeep: config.etcdSnapshotKeep,
      ...(config.backupCron ? { backupCron: config.backupCron } : {}),
      backupKeep: config.backupKeep,
      collectConcurrency: config.collectConcurrency,
      collectDeadlineMs: config.collectDeadlineMs,
      retentionRawS: config.retentionRawS,
      keepAliveMs: 15_000,
      followPollMs: 500,
      // A cancel gives tofu this whole grace after its SIGINT; a shutdown gives it only what is left
      // of the same budget (the worker's RunAbort carries it), so the two never add up.
      tofu: { bin: config.tofuBin, pathEnv: process.env.PATH ?? '', selfUrl: '', cancelGraceMs: config.shutdownGraceS * 1000, lockTimeout: '30s' },
      trustIngress: config.trustIngress,
      stateKeepVersions: config.stateKeepVersions,
      ...(config.meshStunServers.length ? { meshStunServers: config.meshStunServers, meshStunCron: config.meshStunCron } : {}),
      ...(config.nodeNetworks ? { nodeNetworks: config.nodeNetworks } : {}),
    },
    // Secret generation (keys, DER certificates, the config bundle) loads with the first cluster created, not at start.
    newClusterSecrets: async () => (await import('../lib/talos/secrets.ts')).generateSecrets(),
    metrics,
    backups: nodeBackupFiles(join(config.dataDir, 'backups')),
  });
  // The WireGuard hub runs here (Node): PUT …/mesh applies it, GET …/mesh reads `wg show`.
  const meshHub = lazyMeshHub(deps);
  deps.meshHub = meshHub;

  // Before the listener: from its first request on, /readyz answers 200, so everything the start
  // awaits comes first and the worker starts in the same turn as the listen callback.
  // Run files left by a crash hold machine configs. Another runner may share this data dir, so
  // only files of runs the database says have ended are removed.
  await removeStaleRunFiles(config.dataDir, async (runId) => {
    const run = await deps.jobs.get(runId);
    if (!run) return true;
    // An ended run's directory may hold what its tofu could not upload: stored, then removed.
    if (isTerminal(run.state)) await clearRunFiles(deps, run);
    return false;
  });
  await removePartialBackups(config.dataDir);

  const app = createApp(deps, { ...opts.app, dashboard: { remoteAddress: nodeRemoteAddress, ...opts.app?.dashboard } });
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, () => resolve(s));
  });
  const port = (server.address() as AddressInfo).port;
  const loopback = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  deps.settings.tofu.selfUrl = `http://${loopback.includes(':') ? `[${loopback}]` : loopback}:${port}`;

  const gcWhenIdle = idleGc({ delayMs: GC_AFTER_RUNS_MS, onError: (err) => log.warn('gc after runs failed', { error: errorMessage(err) }) });
  const worker = createWorker({
    deps,
    executors: gcWhenIdle.wrap(opts.executors ?? executors()),
    workerId: localWorkerId(),
    leaseMs: config.leaseMs,
    concurrency: config.workerConcurrency,
    onInterrupted: (ids) => onRunsInterrupted(deps, ids),
  });
  worker.start();
  // Neither serving nor running jobs waits for the schedule or the mesh hub, so they start with the
  // warm-up, off the way to the first /readyz: loading croner, its first next-run computation and
  // the hub's database read were a few ms of every start. A tick due in that second is skipped, as
  // it is for a runner started a second later.
  let cron: { stop(): void } | undefined;
  let stopping = false;
  const warmUp = setTimeout(() => {
    void import('./cron.ts').then(
      ({ startCron }) => {
        // A schedule started after stop() would keep the process alive.
        if (!stopping) cron = startCron(cronJobs(deps), log);
      },
      (err: unknown) => log.error('schedule not started', { error: errorMessage(err) }),
    );
    // Brings the hub back (interface, key, peers).
    void meshHub.resume().then(
      (s) => s && s.state !== 'up' && log.warn('mesh hub not running', { missing: s.missing }),
      (err: unknown) => log.error('mesh hub not restored', { error: String(err) }),
    );
    mountRoutesNow(app).catch((err: unknown) => log.error('routes not mounted', { error: errorMessage(err) }));
  }, WARM_UP_AFTER_MS);
  warmUp.unref();
  const shownHost = config.host.includes(':') ? `[${config.host}]` : config.host;
  log.info('runner started', { url: `http://${shownHost}:${port}`, database: database.local ? 'embedded' : 'remote' });

  let stopped: Promise<void> | undefined;
  return {
    url: deps.settings.tofu.selfUrl,
    port,
    deps,
    stop() {
      stopped ??= (async () => {
        stopping = true;
        clearTimeout(warmUp);
        cron?.stop();
        gcWhenIdle.stop();
        metrics.stop();
        // The listener is also tofu's state backend: it keeps serving until every run (and so
        // every tofu child) has ended, or tofu's final state upload would fail and its
        // resources would be missing from the stored state. REZUS_SHUTDOWN_GRACE_S is that whole
        // wait, not a wait before tofu's grace: a supervisor SIGKILLs after the time it was told
        // (the add-on's 60 s for at most 50), and tofu must have written its state by then.
        await worker.stop(config.shutdownGraceS * 1000);
        await meshHub.stop().catch((err: unknown) => log.error('mesh hub not stopped', { error: String(err) }));
        const closed = new Promise<void>((r) => server.close(() => r()));
        // Channels the collect passes keep open to nodes between passes.
        await closeExecutors(deps);
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        await closed;
        database.close();
        log.info('runner stopped');
      })();
      return stopped;
    },
  };
}

/**
 * The hub's control, built on the first mesh request: its driver brings execa (and the hub sync
 * the mesh tables' code), which a runner that never serves a mesh route does not need at start.
 */
/**
 * The hub's code (and execa) loads with the first mesh request, or at start when the database
 * holds a hub to bring back; a runner without a mesh never loads it.
 */
function lazyMeshHub(deps: Deps): RunnerMeshHub {
  let hub: Promise<RunnerMeshHub> | undefined;
  const load = () =>
    (hub ??= Promise.all([import('../lib/mesh/hub-sync.ts'), import('../lib/mesh/hub-driver.ts')]).then(([sync, driver]) =>
      sync.createMeshHubControl(deps, driver.createHubDriver({ interfaceName: DEFAULT_INTERFACE, scratchDir: join(deps.settings.dataDir, 'mesh-scratch') })),
    ));
  return {
    sync: async () => (await load()).sync(),
    status: async () => (await load()).status(),
    resume: async () => ((await loadHub(deps.db)) ? (await load()).resume() : null),
    // Nothing was started when nothing was loaded.
    stop: async () => (hub ? (await hub).stop() : undefined),
  };
}
