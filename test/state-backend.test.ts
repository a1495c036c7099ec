import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mintStateCredential, pruneStateCredentials, revokeStateCredential } from '../functions/state/credentials.ts';
import { STATE_MAX_BODY_BYTES } from '../functions/state/backend.ts';
import { createHarness, manualClock, seedCluster, type Harness } from './support/harness.ts';
import { basic, lockInfo, md5, stateClient, stateDoc } from './support/state.ts';

let h: Harness;
let clock: ReturnType<typeof manualClock>;
let ids: { tenantId: string; clusterId: string };

beforeEach(async () => {
  clock = manualClock();
  h = await createHarness({ clock });
  ids = await seedCluster(h, 'alpha');
});
afterEach(async () => h.close());

async function client(runId = 'run_a', target = ids, ttlMs = 60_000) {
  const cred = await mintStateCredential(h.deps, { runId, ...target, ttlMs });
  return { cred, ...stateClient(h, target.tenantId, target.clusterId, basic(cred)) };
}

describe('state backend: reads and writes', () => {
  it('answers 204 with no state, then keeps every version with its serial and lineage', async () => {
    const s = await client();
    expect((await s.get()).status).toBe(204);

    const v1 = stateDoc('lin-1', 1);
    expect((await s.post(v1)).status).toBe(200);
    const v2 = stateDoc('lin-1', 2, { outputs: { ip: { value: '192.0.2.7', type: 'string' } } });
    const w2 = await s.post(v2);
    expect(w2.status).toBe(200);
    expect(w2.json).toMatchObject({ version: 2, serial: 2, created: true });

    const cur = await s.get();
    expect(cur.status).toBe(200);
    expect(cur.text).toBe(v2);
    expect(cur.headers.get('content-md5')).toBe(md5(v2));
    expect((await s.get('?version=1')).text).toBe(v1);
    expect((await s.get('?version=9')).status).toBe(404);
    expect((await s.get('?version=abc')).status).toBe(400);

    const list = await h.call('GET', `/v1/clusters/${ids.clusterId}/state/versions`);
    expect(list.status).toBe(200);
    expect(list.body.versions.map((v: { version: number; serial: number }) => [v.version, v.serial])).toEqual([
      [2, 2],
      [1, 1],
    ]);
    expect(list.body.versions[0]).toMatchObject({ lineage: 'lin-1', size: Buffer.byteLength(v2), writtenBy: 'run_a' });
    expect(JSON.stringify(list.body)).not.toContain('192.0.2.7');
  });

  it('stores bodies sealed per version: no plaintext in the database, and a swapped body does not open', async () => {
    const s = await client();
    await s.post(stateDoc('lin-1', 1, { outputs: { marker: { value: 'plaintext-marker-123' } } }));
    await s.post(stateDoc('lin-1', 2, { outputs: { marker: { value: 'plaintext-marker-456' } } }));
    const rows = await h.deps.database.client.execute('SELECT version, body_sealed FROM state_versions ORDER BY version');
    for (const r of rows.rows) expect(String(r.body_sealed)).not.toMatch(/plaintext-marker|lineage/);
    // Move version 2's body into version 1's row: the context binds it to its version.
    await h.deps.database.client.execute({ sql: 'UPDATE state_versions SET body_sealed = ? WHERE version = 1', args: [String(rows.rows[1]!.body_sealed)] });
    expect((await s.get('?version=1')).status).toBe(500);
    expect((await s.get('?version=2')).text).toContain('plaintext-marker-456');
  });

  it('refuses a lineage change (409) but accepts a new lineage after DELETE, keeping history', async () => {
    const s = await client();
    await s.post(stateDoc('lin-1', 3));
    const other = await s.post(stateDoc('lin-2', 4));
    expect(other.status).toBe(409);
    expect(other.json.error.code).toBe('lineage_mismatch');
    const stale = await s.post(stateDoc('lin-1', 2));
    expect(stale.status).toBe(409);
    expect(stale.json.error.code).toBe('stale_serial');
    expect(JSON.parse((await s.get()).text).lineage).toBe('lin-1');

    expect((await s.del()).status).toBe(200);
    expect((await s.get()).status).toBe(204);
    expect((await s.post(stateDoc('lin-2', 1))).status).toBe(200);
    expect(JSON.parse((await s.get()).text).lineage).toBe('lin-2');
    // The purged version is still there for people to look at.
    expect(JSON.parse((await s.get('?version=1')).text).lineage).toBe('lin-1');
    const list = await h.call('GET', `/v1/clusters/${ids.clusterId}/state/versions`);
    expect(list.body.versions.map((v: { deleted: boolean }) => v.deleted)).toEqual([false, true]);
  });

  it('verifies Content-MD5 and rejects bodies that are not state', async () => {
    const s = await client();
    const body = stateDoc('lin-1', 1);
    const wrong = await s.post(body, '', { 'content-md5': md5('something else') });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error.code).toBe('md5_mismatch');
    expect((await s.post(body, '', { 'content-md5': 'not-base64!' })).status).toBe(400);
    expect((await s.post('{"serial":1}')).status).toBe(400);
    expect((await s.post('not json')).status).toBe(400);
    expect((await s.get()).status).toBe(204);
    // Without the header the body is taken as is.
    const res = await h.app.request(s.path, { method: 'POST', headers: { authorization: basic(s.cred), 'content-type': 'application/json' }, body });
    expect(res.status).toBe(200);
  });

  it('does not store a byte-identical rewrite as a new version', async () => {
    const s = await client();
    const body = stateDoc('lin-1', 1);
    await s.post(body);
    expect((await s.post(body)).json).toMatchObject({ version: 1, created: false });
  });

  it('takes a state larger than the API body limit', async () => {
    const s = await client();
    const big = stateDoc('lin-1', 1, { pad: 'x'.repeat(3 * 1024 * 1024) });
    expect((await s.post(big)).status).toBe(200);
    expect((await s.get()).text.length).toBe(big.length);
  });

  it('refuses a body over the state limit with 413 and stores nothing', async () => {
    const s = await client();
    const res = await h.app.request(s.path, {
      method: 'POST',
      headers: { authorization: basic(s.cred), 'content-type': 'application/json' },
      body: new Uint8Array(STATE_MAX_BODY_BYTES + 1).fill(0x20),
    });
    expect(res.status).toBe(413);
    expect((await s.get()).status).toBe(204);
  });
});

describe('state backend: locking', () => {
  it('LOCK when free → 200; a second locker → 423 with the holder info; UNLOCK needs the holder ID', async () => {
    const a = await client('run_a');
    const b = await client('run_b');
    const held = lockInfo('alice@home');
    expect((await a.lock(held)).status).toBe(200);
    // tofu retrying a LOCK whose answer it lost is not refused.
    expect((await a.lock(held)).status).toBe(200);

    const refused = await b.lock(lockInfo('bob@home'));
    expect(refused.status).toBe(423);
    expect(refused.json).toEqual(held);

    const wrongUnlock = await b.unlock(lockInfo('bob@home'));
    expect(wrongUnlock.status).toBe(409);
    expect(wrongUnlock.json.ID).toBe(held.ID);

    expect((await h.call('GET', `/v1/clusters/${ids.clusterId}/state-lock`)).body.lock).toMatchObject({ id: held.ID, who: 'alice@home', heldBy: 'run_a' });
    expect((await a.unlock(held)).status).toBe(200);
    expect((await b.lock(lockInfo('bob@home'))).status).toBe(200);
  });

  it('serves GitLab-style clients too: POST and DELETE on …/lock', async () => {
    const s = await client('run_a');
    const auth = { authorization: basic(s.cred), 'content-type': 'application/json' };
    const held = lockInfo('gitlab-style@ci');
    const send = (method: string, info: object) => h.app.request(`${s.path}/lock`, { method, headers: auth, body: JSON.stringify(info) });
    expect((await send('POST', held)).status).toBe(200);
    const second = await send('POST', lockInfo());
    expect(second.status).toBe(423);
    expect(((await second.json()) as { ID: string }).ID).toBe(held.ID);
    expect((await send('DELETE', lockInfo())).status).toBe(409);
    expect((await send('DELETE', held)).status).toBe(200);
    expect((await s.lock(lockInfo())).status).toBe(200);
  });

  it('refuses POST and DELETE while locked unless ?ID= names the holder, and writes nothing', async () => {
    const s = await client();
    await s.post(stateDoc('lin-1', 1));
    const held = lockInfo();
    await s.lock(held);

    const noId = await s.post(stateDoc('lin-1', 2));
    expect(noId.status).toBe(409);
    expect(noId.json.error.code).toBe('state_locked');
    expect(noId.json.error.details.lock.ID).toBe(held.ID);
    expect((await s.post(stateDoc('lin-1', 2), '?ID=someone-else')).status).toBe(409);
    expect((await s.del()).status).toBe(409);
    expect(JSON.parse((await s.get()).text).serial).toBe(1);

    expect((await s.post(stateDoc('lin-1', 2), `?ID=${held.ID}`)).status).toBe(200);
    expect(JSON.parse((await s.get()).text).serial).toBe(2);
    await s.unlock(held);
    // A write naming a lock that is no longer held is stale: refused too.
    const late = await s.post(stateDoc('lin-1', 3), `?ID=${held.ID}`);
    expect(late.status).toBe(409);
    expect(late.json.error.code).toBe('lock_not_held');
  });

  it('admin force-unlock releases the lock, is audited, and is refused to tenant tokens', async () => {
    const s = await client();
    const held = lockInfo('stuck@ci');
    await s.lock(held);
    const tok = await h.call('POST', `/v1/tenants/${ids.tenantId}/tokens`, { body: { name: 't', scopes: ['read', 'write', 'secrets:read'] } });
    expect((await h.call('DELETE', `/v1/clusters/${ids.clusterId}/state-lock`, { token: tok.body.token })).status).toBe(403);

    const res = await h.call('DELETE', `/v1/clusters/${ids.clusterId}/state-lock`);
    expect(res.status).toBe(200);
    expect(res.body.released).toMatchObject({ id: held.ID, who: 'stuck@ci' });
    expect((await h.call('DELETE', `/v1/clusters/${ids.clusterId}/state-lock`)).status).toBe(404);
    const audit = await h.call('GET', '/v1/audit');
    expect(JSON.stringify(audit.body)).toContain('state.force_unlock');
    expect((await s.post(stateDoc('lin-1', 1))).status).toBe(200);
  });

  it('revoking a run credential also frees the lock that run left behind', async () => {
    const a = await client('run_a');
    await a.lock(lockInfo());
    expect(await revokeStateCredential(h.deps, 'run_a')).toEqual({ releasedLock: true });
    expect((await a.get()).status).toBe(401);
    const b = await client('run_b');
    expect((await b.lock(lockInfo())).status).toBe(200);
  });
});

describe('state backend: credentials', () => {
  it('rejects missing, wrong and expired credentials with 401 and a Basic challenge', async () => {
    const s = await client('run_a', ids, 10_000);
    await s.post(stateDoc('lin-1', 1));
    const none = await h.app.request(s.path);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Basic /);
    const wrong = stateClient(h, ids.tenantId, ids.clusterId, basic({ username: 'run_a', password: 'guess' }));
    expect((await wrong.get()).status).toBe(401);
    const unknown = stateClient(h, ids.tenantId, ids.clusterId, basic({ username: 'run_zz', password: s.cred.password }));
    expect((await unknown.get()).status).toBe(401);

    clock.advance(10_001);
    const expired = await s.get();
    expect(expired.status).toBe(401);
    expect(expired.text).not.toContain('lin-1');
    expect((await s.post(stateDoc('lin-1', 2))).status).toBe(401);
  });

  it('prunes expired credentials and keeps live ones', async () => {
    const short = await client('run_short', ids, 1_000);
    const long = await client('run_long', ids, 60_000);
    clock.advance(1_000);
    expect(await pruneStateCredentials(h.deps)).toBe(1);
    expect((await short.get()).status).toBe(401);
    expect((await long.get()).status).toBe(204);
  });

  it('keeps only a hash of the password', async () => {
    const s = await client();
    const rows = await h.deps.database.client.execute('SELECT * FROM state_credentials');
    expect(JSON.stringify(rows.rows)).not.toContain(s.cred.password);
  });

  it('never lets one cluster’s credential read or write another’s state', async () => {
    const other = await seedCluster(h, 'beta');
    const mine = await client('run_a');
    const theirs = await client('run_b', other);
    await theirs.post(stateDoc('secret-lineage', 1, { outputs: { token: { value: 'beta-secret' } } }));

    // My credential against their URL, and against my tenant with their cluster.
    for (const target of [stateClient(h, other.tenantId, other.clusterId, basic(mine.cred)), stateClient(h, ids.tenantId, other.clusterId, basic(mine.cred))]) {
      const read = await target.get();
      expect(read.status).toBe(403);
      expect(read.text).not.toContain('beta-secret');
      expect((await target.post(stateDoc('secret-lineage', 2))).status).toBe(403);
      expect((await target.lock(lockInfo())).status).toBe(403);
      expect((await target.del()).status).toBe(403);
    }
    expect(JSON.parse((await theirs.get()).text).serial).toBe(1);
    expect((await theirs.lock(lockInfo())).status).toBe(200);

    // A tenant token sees neither the other cluster's history nor its lock.
    const tok = await h.call('POST', `/v1/tenants/${ids.tenantId}/tokens`, { body: { name: 't' } });
    expect((await h.call('GET', `/v1/clusters/${other.clusterId}/state/versions`, { token: tok.body.token })).status).toBe(404);
    expect((await h.call('GET', `/v1/clusters/${other.clusterId}/state-lock`, { token: tok.body.token })).status).toBe(404);
  });

  it('refuses to mint a credential for a cluster of another tenant', async () => {
    const other = await seedCluster(h, 'beta');
    await expect(mintStateCredential(h.deps, { runId: 'run_x', tenantId: ids.tenantId, clusterId: other.clusterId, ttlMs: 1000 })).rejects.toThrow(/does not belong/);
  });

  it('lets an admin bearer token read (audited) but not write; tenant tokens get nothing', async () => {
    const s = await client();
    await s.post(stateDoc('lin-1', 1));
    const admin = stateClient(h, ids.tenantId, ids.clusterId, `Bearer ${h.adminToken}`);
    expect(JSON.parse((await admin.get()).text).lineage).toBe('lin-1');
    expect((await admin.post(stateDoc('lin-1', 2))).status).toBe(403);
    expect((await admin.lock(lockInfo())).status).toBe(403);
    const wrongPair = stateClient(h, ids.tenantId, 'cl_aaaaaaaaaaaaaaaa', `Bearer ${h.adminToken}`);
    expect((await wrongPair.get()).status).toBe(404);

    const tok = await h.call('POST', `/v1/tenants/${ids.tenantId}/tokens`, { body: { name: 't', scopes: ['read', 'write', 'secrets:read'] } });
    const tenant = stateClient(h, ids.tenantId, ids.clusterId, `Bearer ${tok.body.token}`);
    expect((await tenant.get()).status).toBe(403);
    const audit = await h.call('GET', '/v1/audit');
    expect(JSON.stringify(audit.body)).toContain('state.read');
  });
});

describe('cluster deletion', () => {
  it('is refused while the cluster has live tofu state, allowed once the state is purged', async () => {
    const s = await client();
    await s.post(stateDoc('lin-1', 1, { resources: [{ mode: 'managed', type: 'terraform_data', name: 'm', instances: [{ attributes: {} }] }] }));
    const refused = await h.call('DELETE', `/v1/clusters/${ids.clusterId}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toMatch(/tofu state/);
    await s.del();
    expect((await h.call('DELETE', `/v1/clusters/${ids.clusterId}`)).status).toBe(204);
  });
});
