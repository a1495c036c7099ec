import { eq } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { clusters } from '../db/schema/index.ts';
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


describe('etcd snapshots', () => {
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
    const first = await h.call('POST', base, { body: { keep: 2 } });
    expect(first.status).toBe(202);
    expect((await waitForRun(h, first.body.run.id)).state).toBe('succeeded');
    expect(c.sim('cp1').calls.map((x) => x.method)).not.toContain('EtcdSnapshot');

    const list = (await h.call('GET', base)).body.snapshots;
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ machine: 'cp2', sizeBytes: c.sim('cp2').etcdData.length, revision: '5151', trigger: 'manual' });
    expect(list[0].sealed).toBeUndefined();

    const dl = await h.call('GET', `${base}/${list[0].id}`);
    expect(dl.status).toBe(200);
    // The sim's database is ASCII, so the harness's text body is the bytes.
    expect(Buffer.from(dl.body as string).equals(c.sim('cp2').etcdData)).toBe(true);
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
    const stored = await h.call('GET', `${base}/${kept[0].id}`);
    expect(fresh.recoveredFrom?.equals(Buffer.from(stored.body as string))).toBe(true);
    expect(fresh.bootstrapped).toBe(true);
    const calls = fresh.calls.map((x) => x.method);
    expect(calls.indexOf('EtcdRecover')).toBeLessThan(calls.indexOf('Bootstrap'));

    expect((await h.call('POST', `${base}/${kept[0].id}/restore`, { body: { machine: 'nope' } })).status).toBe(404);
    expect((await h.call('POST', `${base}/nope/restore`, { body: { machine: 'cp4' } })).status).toBe(404);
  });
});
