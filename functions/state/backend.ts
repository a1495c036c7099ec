import { and, eq } from 'drizzle-orm';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { clusters } from '../../db/schema/index.ts';
import { authenticate } from '../auth.ts';
import { bearerToken } from '../../lib/auth/tokens.ts';
import { ApiError, badRequest, errorBody, notFound } from '../../lib/http/errors.ts';
import { recordAudit } from '../audit/record.ts';
import type { AppEnv } from '../context.ts';
import { isTerminal } from '../../lib/jobs/types.ts';
import { basicCredentials, checkStateCredential } from './credentials.ts';
import { acquireLock, parseLockInfo, releaseLock } from './locks.ts';
import { StateWriteRefused, keepRecoverableVersion, currentVersion, findVersion, md5Base64, openVersion, parseStateDocument, purgeState, writeState } from './store.ts';

/** States grow with every resource; the API's 1 MiB limit would cut real ones. */
export const STATE_MAX_BODY_BYTES = 64 * 1024 * 1024;

interface StateAccess {
  tenantId: string;
  clusterId: string;
  /** The run whose credential was presented; null for an admin bearer token. */
  runId: string | null;
}

type StateContext = Context<AppEnv>;

const REALM = 'Basic realm="rezus-state", charset="UTF-8"';

function refuse(c: StateContext, status: 401 | 403 | 404, code: string, message: string) {
  return c.json(errorBody(new ApiError(status, code, message)), status, status === 401 ? { 'WWW-Authenticate': REALM } : {});
}

/**
 * Basic auth with a per-run credential bound to one tenant and cluster, or an admin bearer token
 * for read-only debugging. A credential for another cluster gets 403 and never any state.
 */
async function authorize(c: StateContext): Promise<StateAccess | Response> {
  const tenant = c.req.param('tenant') ?? '';
  const cluster = c.req.param('cluster') ?? '';
  const deps = c.var.deps;
  const header = c.req.header('authorization');
  const basic = basicCredentials(header);
  if (basic) {
    const caller = await checkStateCredential(deps, basic.username, basic.password);
    if (!caller) return refuse(c, 401, 'unauthorized', 'invalid or expired state credential');
    if (caller.tenantId !== tenant || caller.clusterId !== cluster) {
      return refuse(c, 403, 'forbidden', 'this credential is for another cluster');
    }
    c.set('principal', { tokenId: `run:${caller.runId}`, tenantId: caller.tenantId, scopes: [], admin: false });
    return { tenantId: tenant, clusterId: cluster, runId: caller.runId };
  }
  const principal = await authenticate(deps, bearerToken(header));
  if (!principal) return refuse(c, 401, 'unauthorized', 'state needs basic auth with a run credential');
  if (!principal.admin) return refuse(c, 403, 'forbidden', 'only run credentials and admin tokens reach the state backend');
  if (c.req.method !== 'GET') return refuse(c, 403, 'forbidden', 'admin tokens may only read state');
  const row = await deps.db
    .select({ id: clusters.id })
    .from(clusters)
    .where(and(eq(clusters.id, cluster), eq(clusters.tenantId, tenant)))
    .get();
  if (!row) return refuse(c, 404, 'not_found', 'cluster not found');
  c.set('principal', principal);
  return { tenantId: tenant, clusterId: cluster, runId: null };
}

async function runHasEnded(deps: AppEnv['Variables']['deps'], runId: string): Promise<boolean> {
  const run = await deps.jobs.get(runId);
  return !!run && isTerminal(run.state);
}

/** `?ID=` as tofu appends it to writes while it holds the lock. */
const lockIdParam = (c: StateContext) => c.req.query('ID');

function writeRefusal(c: StateContext, err: StateWriteRefused) {
  if (err.reason === 'locked' && err.holder) {
    let holder: Record<string, unknown> = {};
    try {
      holder = JSON.parse(err.holder.info) as Record<string, unknown>;
    } catch {
      /* stored verbatim from tofu; show nothing rather than fail */
    }
    const details = { lock: { ID: err.holder.lockId, Who: holder.Who, Operation: holder.Operation, Created: holder.Created } };
    return c.json(errorBody(new ApiError(409, 'state_locked', `${err.message}; send ?ID=<lock id>`, details)), 409);
  }
  const code = {
    locked: 'state_locked',
    not_locked: 'lock_not_held',
    lineage: 'lineage_mismatch',
    stale_serial: 'stale_serial',
    serial_conflict: 'serial_conflict',
  }[err.reason];
  return c.json(errorBody(new ApiError(409, code, err.message)), 409);
}

/** Checks a sent Content-MD5 against the bytes received; absent is fine, wrong or malformed is 400. */
function checkContentMd5(c: StateContext, body: Uint8Array) {
  const sent = c.req.header('content-md5');
  if (sent === undefined) return;
  if (!/^[A-Za-z0-9+/]{22}==$/.test(sent.trim())) throw badRequest('Content-MD5 is not a base64 MD5 digest');
  if (sent.trim() !== md5Base64(body)) throw new ApiError(400, 'md5_mismatch', 'body does not match Content-MD5');
}

function versionQuery(c: StateContext): number | undefined {
  const raw = c.req.query('version');
  if (raw === undefined) return undefined;
  if (!/^[1-9]\d{0,9}$/.test(raw)) throw badRequest('version must be a positive integer');
  return Number(raw);
}

export function stateBackendRoutes() {
  const app = new Hono<AppEnv>();
  app.use(
    bodyLimit({
      maxSize: STATE_MAX_BODY_BYTES,
      onError: () => {
        throw new ApiError(413, 'body_too_large', `state body exceeds ${STATE_MAX_BODY_BYTES} bytes`);
      },
    }),
  );

  app.get('/:tenant/:cluster', async (c) => {
    const access = await authorize(c);
    if (access instanceof Response) return access;
    const { deps } = c.var;
    const wanted = versionQuery(c);
    const row = wanted === undefined ? await currentVersion(deps, access.clusterId) : await findVersion(deps, access.clusterId, wanted);
    if (!row) {
      if (wanted !== undefined) throw notFound(`state version ${wanted}`);
      // 204 is how the http backend protocol says "no state yet"; tofu then starts a fresh one.
      return c.body(null, 204);
    }
    const body = openVersion(deps, row);
    if (access.runId === null) {
      await recordAudit(c, { action: 'state.read', target: access.clusterId, tenantId: access.tenantId, detail: { version: row.version } });
    }
    return c.body(new Uint8Array(body), 200, { 'content-type': 'application/json', 'content-md5': row.md5 });
  });

  app.post('/:tenant/:cluster', async (c) => {
    const access = await authorize(c);
    if (access instanceof Response) return access;
    const { deps } = c.var;
    const body = new Uint8Array(await c.req.arrayBuffer());
    checkContentMd5(c, body);
    const parsed = parseStateDocument(body);
    if (!parsed) throw badRequest('body is not a tofu state document (JSON object with "lineage" and "serial")');
    try {
      const res = await writeState(deps, {
        ...access,
        body,
        parsed,
        lockId: lockIdParam(c),
        writtenBy: access.runId,
        keepVersions: deps.settings.stateKeepVersions,
      });
      return c.json({ version: res.version, serial: parsed.serial, created: res.created }, 200);
    } catch (err) {
      if (!(err instanceof StateWriteRefused)) throw err;
      // A run that lost its lock (reaped, then force-unlocked) still reports what its tofu did:
      // that state is kept aside as a hidden version for recovery, never dropped.
      if ((err.reason === 'locked' || err.reason === 'not_locked') && access.runId && (await runHasEnded(deps, access.runId))) {
        const kept = await keepRecoverableVersion(deps, { tenantId: access.tenantId, clusterId: access.clusterId, body, parsed, runId: access.runId });
        deps.log.warn('late state write of an ended run kept as a hidden version', { run: access.runId, cluster: access.clusterId, version: kept.version });
        return c.json({ version: kept.version, serial: parsed.serial, created: true, recoverable: true }, 200);
      }
      return writeRefusal(c, err);
    }
  });

  app.delete('/:tenant/:cluster', async (c) => {
    const access = await authorize(c);
    if (access instanceof Response) return access;
    const { deps } = c.var;
    try {
      const res = await purgeState(deps, { clusterId: access.clusterId, lockId: lockIdParam(c), by: access.runId });
      await recordAudit(c, { action: 'state.delete', target: access.clusterId, tenantId: access.tenantId, detail: res });
      return c.json(res, 200);
    } catch (err) {
      if (err instanceof StateWriteRefused) return writeRefusal(c, err);
      throw err;
    }
  });

  const lock = async (c: StateContext) => {
    const access = await authorize(c);
    if (access instanceof Response) return access;
    const { deps } = c.var;
    const info = parseLockInfo(await c.req.text());
    if (!info) throw badRequest('lock body must be tofu LockInfo JSON with an "ID"');
    const res = await acquireLock(deps, { tenantId: access.tenantId, clusterId: access.clusterId, lock: info, heldBy: access.runId });
    if (!res.acquired) return c.body(res.holderInfo, 423, { 'content-type': 'application/json' });
    return c.body(info.raw, 200, { 'content-type': 'application/json' });
  };

  const unlock = async (c: StateContext) => {
    const access = await authorize(c);
    if (access instanceof Response) return access;
    const { deps } = c.var;
    const info = parseLockInfo(await c.req.text());
    if (!info) throw badRequest('unlock body must be tofu LockInfo JSON with an "ID"');
    const res = await releaseLock(deps, access.clusterId, info.id, access.runId);
    if ('conflict' in res) return c.body(res.holderInfo, 409, { 'content-type': 'application/json' });
    return c.json({ released: res.released }, 200);
  };

  // tofu's defaults (lock_method LOCK, unlock_method UNLOCK on the state address) …
  app.on('LOCK', '/:tenant/:cluster', lock);
  app.on('UNLOCK', '/:tenant/:cluster', unlock);
  // … and the GitLab-style layout many existing backend blocks use (POST/DELETE on …/lock).
  app.post('/:tenant/:cluster/lock', lock);
  app.delete('/:tenant/:cluster/lock', unlock);

  return app;
}
