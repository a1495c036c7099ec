import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';
import { signDelivery } from '../../lib/auth/webhook.ts';
import { startHranaSim } from '../sim/hrana/server.ts';
import { startRunner } from './runner-process.ts';
import { httpCaller, type Json } from './api-caller.ts';
import { buildWorker } from './wrangler-build.ts';

// Nothing leaves the machine: no wrangler telemetry, no Request.cf download.
process.env.WRANGLER_SEND_METRICS = 'false';
process.env.CLOUDFLARE_CF_FETCH_ENABLED = 'false';

export interface EdgeStack {
  /** The product Worker (built by `wrangler deploy --dry-run`) in workerd. */
  mf: Miniflare;
  bundle: string;
  runnerUrl: string;
  adminToken: string;
  /** An admin request to the home runner. */
  home(method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }>;
  close(): Promise<void>;
}

/**
 * The edge deployment as it runs for real: the Hrana simulator holds the shared database, the
 * Worker serves intake from it in workerd, and a home runner process (same database) claims runs.
 */
export async function startEdgeStack(opts: {
  wranglerNode: string;
  label: string;
  runnerEnv?: Record<string, string>;
  workerBindings?: Record<string, string>;
}): Promise<EdgeStack> {
  const dbToken = randomBytes(16).toString('hex');
  const adminToken = randomBytes(24).toString('hex');
  const edgeKey = randomBytes(32).toString('base64');
  const dir = await mkdtemp(join(tmpdir(), `rezus-${opts.label}-`));
  const sim = await startHranaSim({ dbPath: join(dir, 'shared.db'), authToken: dbToken });
  const [bundle, runner] = await Promise.all([
    buildWorker(opts.wranglerNode, join(import.meta.dirname, '..', '..', 'wrangler.toml'), join(dir, 'dist')),
    startRunner({
      REZUS_DB_URL: sim.url,
      REZUS_DB_AUTH_TOKEN: dbToken,
      REZUS_DATA_DIR: join(dir, 'home'),
      REZUS_HOST: '127.0.0.1',
      REZUS_PORT: '0',
      REZUS_ADMIN_TOKEN: adminToken,
      REZUS_MASTER_KEY: randomBytes(32).toString('base64'),
      REZUS_EDGE_KEY: edgeKey,
      REZUS_COLLECT_CRON: '0 0 1 1 *',
      ...opts.runnerEnv,
    }),
  ]);
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      modules: true,
      scriptPath: bundle,
      // Module names are relative to this root; a bundle outside the working directory needs its own.
      modulesRoot: dirname(bundle),
      compatibilityDate: '2026-11-01',
      compatibilityFlags: ['nodejs_compat'],
      cf: false,
      bindings: { REZUS_DB_URL: sim.url, REZUS_DB_AUTH_TOKEN: dbToken, REZUS_EDGE_KEY: edgeKey, ...opts.workerBindings },
    }),
  );
  return {
    mf,
    bundle,
    runnerUrl: runner.url,
    adminToken,
    home: (method, path, body) => httpCaller(runner.url, adminToken)(method, path, { body }),
    async close() {
      await mf.dispose();
      runner.child.kill('SIGTERM');
      await runner.child;
      await sim.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The replay-proof scheme: the signature covers the timestamp and the delivery id with the body. */
export function signedHeaders(secret: string, raw: Uint8Array, delivery: string): Record<string, string> {
  const ts = String(Math.floor(Date.now() / 1000));
  return { 'x-rezus-signature': signDelivery(secret, ts, delivery, raw), 'x-rezus-timestamp': ts, 'x-rezus-delivery': delivery };
}
