// The Worker's Deps: the same queue, clock and settings shape as the runner, a database reached
// over HTTP, and no master key. Built per request (see functions/worker.ts).
import { openWebDatabase } from '../../db/web.ts';
import { createSealer } from '../../lib/crypto/seal.ts';
import { parseKey32 } from '../../lib/crypto/key-text.ts';
import type { RunBus } from '../../lib/jobs/bus.ts';
import { createJobs } from '../../lib/jobs/queue.ts';
import { createLogger, type LogLevel } from '../../lib/log.ts';
import { parseNodeNetworks } from '../../lib/talos/node-networks.ts';
import type { Deps } from '../context.ts';
import { noMetrics } from '../ops/http-metrics.ts';
import { refusingSealer, runsAtHome } from './refuse.ts';

/** Bindings from wrangler.toml ([vars]) and `wrangler secret put`. */
export interface EdgeEnv {
  REZUS_DB_URL: string;
  REZUS_DB_AUTH_TOKEN?: string;
  /** Opens webhook secrets only; home holds the same key. */
  REZUS_EDGE_KEY?: string;
  /** Optional: without it the edge accepts the database's API tokens only. */
  REZUS_ADMIN_TOKEN?: string;
  REZUS_LOG_LEVEL?: string;
  /** SSE followers poll the database this often (ms); there is no in-process bus across hosts. */
  REZUS_FOLLOW_POLL_MS?: string;
  REZUS_STREAM_READS?: string;
  /** The runner's REZUS_NODE_NETWORKS, so the Worker's API refuses the addresses the runner would never dial. */
  REZUS_NODE_NETWORKS?: string;
}

// Nothing in an isolate waits for in-process nudges: followers and the home worker poll the database.
const pollingOnlyBus: RunBus = { publish() {}, subscribe: () => () => {}, wake() {}, onWake: () => () => {}, cancel() {}, onCancel: () => () => {} };

const LEVELS = new Set(['debug', 'info', 'warn', 'error']);
const DEFAULT_STREAM_READS = 40;
/** A stream with fewer could not read the run's state and the events before its end in one go. */
const MIN_STREAM_READS = 3;

export function edgeDeps(env: EdgeEnv): Deps {
  if (!env.REZUS_DB_URL) throw new Error('REZUS_DB_URL is not set (wrangler secret put REZUS_DB_URL)');
  const database = openWebDatabase({ url: env.REZUS_DB_URL, authToken: env.REZUS_DB_AUTH_TOKEN || undefined });
  const clock = { now: () => Date.now() };
  const level = LEVELS.has(env.REZUS_LOG_LEVEL ?? '') ? (env.REZUS_LOG_LEVEL as LogLevel) : 'info';
  // A bad list stops every request, as it stops the runner at start: a Worker that ignored it would take addresses the runner refuses.
  const nodeNetworks = parseNodeNetworks(env.REZUS_NODE_NETWORKS ?? '');
  const followPollMs = Number(env.REZUS_FOLLOW_POLL_MS) > 0 ? Number(env.REZUS_FOLLOW_POLL_MS) : 1000;
  // A request's subrequests: 50 on the free plan, of which the token and the run take a few.
  const streamReads = Number(env.REZUS_STREAM_READS) >= MIN_STREAM_READS ? Math.floor(Number(env.REZUS_STREAM_READS)) : DEFAULT_STREAM_READS;
  return {
    database,
    db: database.db,
    jobs: createJobs({ db: database.db, clock, bus: pollingOnlyBus }),
    bus: pollingOnlyBus,
    sealer: refusingSealer,
    ...(env.REZUS_EDGE_KEY ? { webhookSealer: createSealer(parseKey32(env.REZUS_EDGE_KEY, 'REZUS_EDGE_KEY')) } : {}),
    clock,
    log: createLogger(level, (line) => console.error(line)),
    settings: {
      dataDir: '',
      adminToken: env.REZUS_ADMIN_TOKEN || undefined,
      collectCron: '',
      collectConcurrency: 1,
      collectDeadlineMs: 0,
      retentionRawS: 0,
      followPollMs,
      keepAliveMs: 15_000,
      streamReads,
      tofu: { pathEnv: '', selfUrl: '', cancelGraceMs: 0 },
      ...(nodeNetworks ? { nodeNetworks } : {}),
    },
    metrics: noMetrics,
    newClusterSecrets: () => Promise.reject(runsAtHome('creating a cluster (RSA-4096 key generation)')),
  };
}
