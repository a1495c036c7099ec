import { mkdtemp, rm } from 'node:fs/promises';
import { closeCollectAccessCache } from '../../runner/jobs/collect/access-cache.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { apiCaller, httpCaller, type ApiCall, type Json } from './api-caller.ts';
import { openDatabase, runMigrations } from '../../db/client.ts';
import { createApp, type AppOptions } from '../../functions/app.ts';
import { nodeRemoteAddress } from '../../runner/remote-address.ts';
import { createPromMetrics } from '../../runner/metrics.ts';
import { assembleDeps, type Deps } from '../../functions/context.ts';
import type { Clock } from '../../lib/clock.ts';
import { silentLogger } from '../../lib/log.ts';
import { generateSecrets, type ClusterSecrets } from '../../lib/talos/secrets.ts';

// Real secrets, minted once per test file: RSA-4096 takes seconds and most tests need any valid set.
let shared: Promise<ClusterSecrets> | undefined;
export const sharedSecrets = () => (shared ??= generateSecrets());

export interface Harness {
  deps: Deps;
  app: ReturnType<typeof createApp>;
  dir: string;
  dbFile: string;
  masterKey: Buffer;
  adminToken: string;
  /** JSON request through the real Hono app (no socket). */
  call: ApiCall;
  close(): Promise<void>;
}

/** What the API fixtures need of a harness: its deps and a way to call the API. */
export type ApiAccess = Pick<Harness, 'deps' | 'call'>;

/** The same access to a runner served over HTTP at `url` (deps: the runner's own). */
export function httpApi(url: string, adminToken: string, deps: Deps): ApiAccess {
  return { deps, call: httpCaller(url, adminToken) };
}

export function manualClock(start = Date.UTC(2026, 11, 2, 12, 0, 0)): Clock & { advance(ms: number): void; set(ms: number): void } {
  let now = start;
  return { now: () => now, advance: (ms) => void (now += ms), set: (ms) => void (now = ms) };
}

export async function createHarness(
  opts: { clock?: Clock; app?: AppOptions; patchDeps?: (d: Deps) => void; freshSecrets?: boolean } = {},
): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'rezus-test-'));
  const dbFile = join(dir, 'rezus.db');
  const database = await openDatabase({ url: `file:${dbFile}` });
  await runMigrations(database);
  const masterKey = randomBytes(32);
  const clock = opts.clock ?? { now: () => Date.now() };
  const adminToken = 'test-admin-' + randomBytes(16).toString('hex');
  const deps: Deps = assembleDeps({
    database,
    masterKey,
    clock,
    log: silentLogger,
    settings: {
      dataDir: dir,
      adminToken,
      collectCron: '* * * * *',
      collectConcurrency: 16,
      collectDeadlineMs: 2_000,
      retentionRawS: 24 * 3600,
      keepAliveMs: 300,
      followPollMs: 50,
      tofu: { pathEnv: process.env.PATH ?? '', selfUrl: '', cancelGraceMs: 20_000, lockTimeout: '1s' },
    },
    newClusterSecrets: opts.freshSecrets ? generateSecrets : sharedSecrets,
    metrics: createPromMetrics(() => deps),
  });
  opts.patchDeps?.(deps);
  const app = createApp(deps, { ...opts.app, dashboard: { remoteAddress: nodeRemoteAddress, ...opts.app?.dashboard } });
  return {
    deps,
    app,
    dir,
    dbFile,
    masterKey,
    adminToken,
    call: apiCaller((path, init) => app.request(path, init), adminToken),
    async close() {
      closeCollectAccessCache(deps);
      database.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Creates a tenant and a cluster, returning their ids. */
export async function seedCluster(h: Harness, name = 'home', extra: Record<string, unknown> = {}) {
  const t = await h.call('POST', '/v1/tenants', { body: { name } });
  const cl = await h.call('POST', '/v1/clusters', {
    body: { tenant: t.body.id, name: 'c1', talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3', endpoint: 'https://[2001:db8::1]:6443', ...extra },
  });
  if (cl.status !== 201) throw new Error(`seed cluster failed: ${cl.status} ${JSON.stringify(cl.body)}`);
  return { tenantId: t.body.id as string, clusterId: cl.body.id as string };
}

export const ENDED_STATES = ['succeeded', 'failed', 'canceled', 'interrupted'] as const;

/** Polls the run until its state is one of `states` (default: any end state); bounded by `timeoutMs`. */
export async function waitForRun(h: Pick<Harness, 'deps'>, runId: string, states: readonly string[] = ENDED_STATES, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = await h.deps.jobs.get(runId);
    if (run && states.includes(run.state)) return run;
    if (Date.now() > deadline) throw new Error(`run ${runId} did not reach ${states.join('|')} in ${timeoutMs} ms (state: ${run?.state ?? 'missing'})`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** waitForRun, answered as the API shows the ended run (result and error included). */
export async function finishedRun(h: ApiAccess, runId: string, timeoutMs = 60_000): Promise<Json> {
  await waitForRun(h, runId, ENDED_STATES, timeoutMs);
  return (await h.call('GET', `/v1/runs/${runId}`)).body;
}

/** Resolves once `signal` is aborted, at once if it already is (an executor may see the abort before it starts listening). */
export function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
