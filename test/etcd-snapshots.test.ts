import { createHash } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { clusters } from '../db/schema/index.ts';
import { etcdSnapshotProblem } from '../lib/talos/etcd-snapshot.ts';
import { executors } from '../runner/jobs/registry.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { startSimNode, type SimTalosNode } from './sim/talos/index.ts';
import { waitForRun, createHarness, type Harness } from './support/harness.ts';
import { fleet, startUpgradeCluster, type UpgradeCluster } from './support/upgrade-cluster.ts';

let h: Harness | undefined;
let worker: Worker | undefined;
let cluster: UpgradeCluster | undefined;
const extra: SimTalosNode[] = [];

afterEach(async () => {
  await worker?.stop(0);
  for (const s of extra.splice(0)) await s.stop();
  await cluster?.stop();
  await h?.close();
  worker = undefined;
  cluster = undefined;
  h = undefined;
});


/** A download's bytes (the harness's caller reads bodies as text). */
async function download(hh: Harness, path: string): Promise<Buffer> {
  const res = await hh.app.request(path, { headers: { authorization: `Bearer ${hh.adminToken}` } });
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

describe('etcd snapshots', () => {
  it('a whole snapshot is the database then its sha256; anything else names what is wrong', () => {
    const db = Buffer.alloc(8192, 7);
    const file = Buffer.concat([db, createHash('sha256').update(db).digest()]);
    expect(etcdSnapshotProblem(file)).toBeUndefined();
    expect(etcdSnapshotProblem(db)).toBe("it does not end with etcd's sha256 (8192 bytes: cut short?)");
    expect(etcdSnapshotProblem(file.subarray(0, 5000))).toBe("it does not end with etcd's sha256 (5000 bytes: cut short?)");
    const flipped = Buffer.from(file);
    flipped[10]! ^= 1;
    expect(etcdSnapshotProblem(flipped)).toBe('its trailing sha256 does not match its 8192 bytes of database');
  });

  it('snapshots from a healthy control plane, lists, downloads (secrets:read), prunes, and restores into a fresh control plane', async () => {
    h = await createHarness({ patchDeps: (d) => void (d.settings.pushConfig = { callDeadlineMs: 2_000, readyTimeoutMs: 5_000, pollMs: 25 }) });
    cluster = await startUpgradeCluster(h, { talosVersion: 'v1.13.9', machines: fleet(3, 0) });
    const c = cluster;
    worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'test', leaseMs: 5_000, concurrency: 1, pollMs: 20 });
    worker.start();
    const base = `/v1/clusters/${c.clusterId}/etcd-snapshots`;

    const early = await h.call('POST', base, { body: {} });
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe('not_bootstrapped');
    await h.deps.db.update(clusters).set({ bootstrappedAt: Date.now() }).where(eq(clusters.id, c.clusterId));

    c.sim('cp1').setEtcdErrors(['etcdserver: mvcc: database space exceeded']);
    c.sim('cp2').etcdRaftIndex = 5151;
    // Neither a stream cut short nor one changed on the way is stored: a restore from it would fail.
    c.sim('cp2').snapshotFault = 'truncated';
    c.sim('cp3').snapshotFault = 'corrupt';
    const broken = await waitForRun(h, (await h.call('POST', base, { body: {} })).body.run.id);
    expect(broken.state).toBe('failed');
    expect(broken.error).toBe(
      'no healthy control plane to snapshot from: cp1: etcdserver: mvcc: database space exceeded; ' +
        // Cut after whole chunks, the size still has the shape `talosctl etcd snapshot` checks: only the digest tells.
        'cp2: snapshot not whole: its trailing sha256 does not match its 3072 bytes of database; ' +
        'cp3: snapshot not whole: its trailing sha256 does not match its 4096 bytes of database',
    );
    expect((await h.call('GET', base)).body.snapshots).toEqual([]);
    c.sim('cp2').snapshotFault = undefined;
    c.sim('cp3').snapshotFault = undefined;

    const first = await h.call('POST', base, { body: { keep: 2 } });
    expect(first.status).toBe(202);
    expect((await waitForRun(h, first.body.run.id)).state).toBe('succeeded');
    expect(c.sim('cp1').calls.map((x) => x.method)).not.toContain('EtcdSnapshot');

    const list = (await h.call('GET', base)).body.snapshots;
    expect(list).toHaveLength(1);
    const file = c.sim('cp2').etcdSnapshotFile();
    expect(list[0]).toMatchObject({ machine: 'cp2', sizeBytes: file.length, revision: '5151', trigger: 'manual', sha256: createHash('sha256').update(file).digest('hex') });
    expect(list[0].sealed).toBeUndefined();

    const dl = await h.call('GET', `${base}/${list[0].id}`);
    expect(dl.status).toBe(200);
    // The file as etcd streamed it, trailing sha256 included, as `talosctl bootstrap --recover-from` takes it.
    expect((await download(h, `${base}/${list[0].id}`)).equals(file)).toBe(true);
    expect(dl.headers.get('x-etcd-revision')).toBe('5151');
    expect(dl.headers.get('content-type')).toBe('application/octet-stream');
    const tenantToken = await h.call('POST', `/v1/tenants/${c.tenantId}/tokens`, { body: { name: 'ro', scopes: ['read'] } });
    expect((await h.call('GET', `${base}/${list[0].id}`, { token: tenantToken.body.token })).status).toBe(403);
    expect((await h.call('GET', base, { token: tenantToken.body.token })).status).toBe(200);

    for (let i = 0; i < 2; i++) {
      const r = await h.call('POST', base, { body: { keep: 2 } });
      expect((await waitForRun(h, r.body.run.id)).state).toBe('succeeded');
    }
    const kept = (await h.call('GET', base)).body.snapshots;
    expect(kept).toHaveLength(2);
    expect(kept.map((s: { id: string }) => s.id)).not.toContain(list[0].id);

    // A fresh control plane: configured, etcd never started.
    const m = await h.call('POST', `/v1/clusters/${c.clusterId}/machines`, { body: { name: 'cp4', role: 'controlplane', provider: 'metal', address: '127.0.0.1:1' } });
    const config = await h.call('GET', `/v1/clusters/${c.clusterId}/machines/${m.body.id}/config`);
    const fresh = await startSimNode({ version: 'v1.13.9', initialConfig: config.body as string });
    extra.push(fresh);
    await h.call('PATCH', `/v1/clusters/${c.clusterId}/machines/${m.body.id}`, { body: { address: fresh.address } });

    const restore = await h.call('POST', `${base}/${kept[0].id}/restore`, { body: { machine: 'cp4' } });
    expect(restore.status).toBe(202);
    const rr = await waitForRun(h, restore.body.run.id);
    expect(rr.state, rr.error ?? '').toBe('succeeded');
    expect(fresh.recoveredFrom?.equals(await download(h, `${base}/${kept[0].id}`))).toBe(true);
    // The restored member holds the database the snapshot was taken of.
    expect(fresh.etcdData.equals(c.sim('cp2').etcdData)).toBe(true);
    expect(fresh.bootstrapped).toBe(true);
    const calls = fresh.calls.map((x) => x.method);
    expect(calls.indexOf('EtcdRecover')).toBeLessThan(calls.indexOf('Bootstrap'));

    expect((await h.call('POST', `${base}/${kept[0].id}/restore`, { body: { machine: 'nope' } })).status).toBe(404);
    expect((await h.call('POST', `${base}/nope/restore`, { body: { machine: 'cp4' } })).status).toBe(404);
  });
});
