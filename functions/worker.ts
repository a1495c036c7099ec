// The Cloudflare Workers entry (wrangler.toml `main`): the runner's Hono app over a database reached
// through @libsql/client/web, without the master key. Long work is only queued here; the home
// runner, sharing the database, claims and executes it.
import { Hono, type ExecutionContext } from 'hono';
import { createApp } from './app.ts';
import { failureLimiter } from './auth-limit.ts';
import type { RemoteAddressSource } from './dashboard/ingress.ts';
import { scheduledCollect } from './collect/job.ts';
import { edgeDeps, type EdgeEnv } from './edge/deps.ts';
import { refuseHomeOnly } from './edge/routes.ts';

// Failed authentications are counted per isolate, which Workers reuse across requests (not across
// isolates or locations: a floor, not a global limit), keyed on the client address Cloudflare's
// edge sets; an app built per request would start every count at zero.
const authFailures = failureLimiter();
const clientAddress: RemoteAddressSource = (c) => c.req.header('cf-connecting-ip');

// Deps (and so the database client) are built per request: Workers forbid I/O objects created in
// one request from being used in another, and the HTTP client holds nothing worth keeping.
function edgeApp(env: EdgeEnv) {
  const app = new Hono();
  app.use(refuseHomeOnly);
  app.route('/', createApp(edgeDeps(env), { authLimit: { limiter: authFailures, remoteAddress: clientAddress } }));
  return app;
}

export default {
  fetch(request: Request, env: EdgeEnv, ctx: ExecutionContext): Response | Promise<Response> {
    return edgeApp(env).fetch(request, env, ctx);
  },

  /** The cron only enqueues a collect pass; reading the nodes (port 50000) happens at home. */
  async scheduled(_controller: unknown, env: EdgeEnv, ctx: ExecutionContext): Promise<void> {
    const deps = edgeDeps(env);
    const pass = scheduledCollect(deps).then(
      (run) => deps.log.info(run ? 'collect pass queued for home' : 'collect tick skipped', run ? { run: run.id } : {}),
      (err: unknown) => deps.log.error('collect tick failed', { error: err instanceof Error ? err.message : String(err) }),
    );
    ctx.waitUntil(pass);
    await pass;
  },
};
