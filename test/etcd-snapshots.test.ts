import { createHash, randomBytes } from 'node:crypto';
import { and, eq } from 'drizzle-orm';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { clusters, etcdSnapshotChunks, etcdSnapshots } from '../db/schema/index.ts';
import { snapshotSealContext } from '../functions/etcd/job.ts';
import { SNAPSHOT_CHUNK_BYTES } from '../functions/etcd/stored.ts';
import { EtcdSnapshotCheck, etcdSnapshotProblem } from '../lib/talos/etcd-snapshot.ts';
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

/** A bootstrapped three-control-plane cluster with a worker running jobs. */
async function snapshotCluster(): Promise<{ hh: Harness; c: UpgradeCluster; base: string }> {
  h = await createHarness({ patchDeps: (d) => void (d.settings.pushConfig = { callDeadlineMs: 2_000, readyTimeoutMs: 20_000, pollMs: 25 }) });
  cluster = await startUpgradeCluster(h, { talosVersion: 'v1.13.9', machines: fleet(3, 0) });
  worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'test', leaseMs: 30_000, concurrency: 1, pollMs: 20 });
  worker.start();
  await h.deps.db.update(clusters).set({ bootstrappedAt: Date.now() }).where(eq(clusters.id, cluster.clusterId));
  return { hh: h, c: cluster, base: `/v1/clusters/${cluster.clusterId}/etcd-snapshots` };
}

/** A fresh control plane of the cluster (configured, etcd never started) to restore into. */
async function freshControlPlane(hh: Harness, c: UpgradeCluster, name: string): Promise<SimTalosNode> {
  const m = await hh.call('POST', `/v1/clusters/${c.clusterId}/machines`, { body: { name, role: 'controlplane', provider: 'metal', address: '127.0.0.1:1' } });
  const config = await hh.call('GET', `/v1/clusters/${c.clusterId}/machines/${m.body.id}/config`);
  const fresh = await startSimNode({ version: 'v1.13.9', initialConfig: config.body as string });
  extra.push(fresh);
  await hh.call('PATCH', `/v1/clusters/${c.clusterId}/machines/${m.body.id}`, { body: { address: fresh.address } });
  return fresh;
}

/** A full collection, so a sample counts what is held rather than garbage not yet collected. */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * Samples the growth of process.memoryUsage() while `work` runs, collecting garbage before each
 * sample (every 50 ms, and whenever `work` asks), and answers the largest seen: what the work holds at once.
 */
async function peakGrowth<T>(work: (sample: () => void) => Promise<T>): Promise<{ result: T; arrayBuffers: number; heapUsed: number; rss: number }> {
  gc();
  const start = process.memoryUsage();
  let arrayBuffers = 0;
  let heapUsed = 0;
  let rss = 0;
  const sample = (): void => {
    gc();
    const m = process.memoryUsage();
    arrayBuffers = Math.max(arrayBuffers, m.arrayBuffers - start.arrayBuffers);
    heapUsed = Math.max(heapUsed, m.heapUsed - start.heapUsed);
    rss = Math.max(rss, m.rss - start.rss);
  };
  const timer = setInterval(sample, 50);
  try {
    const result = await work(sample);
    sample();
    return { result, arrayBuffers, heapUsed, rss };
  } finally {
    clearInterval(timer);
  }
}

/**
 * As peakGrowth, for work whose buffers come from the database client: their memory is released by
 * Node-API finalizers a turn after the collection, so each sample lets those run first. Sampled
 * every 200 ms (each sample collects twice).
 */
async function settledPeakGrowth<T>(work: () => Promise<T>): Promise<{ result: T; external: number }> {
  const settle = async (): Promise<number> => {
    gc();
    await new Promise((r) => setImmediate(r));
    gc();
    const m = process.memoryUsage();
    return m.arrayBuffers + m.heapUsed;
  };
  const start = await settle();
  let peak = 0;
  let sampling = Promise.resolve();
  const timer = setInterval(() => {
    sampling = sampling.then(async () => void (peak = Math.max(peak, (await settle()) - start)));
  }, 200);
  try {
    const result = await work();
    clearInterval(timer);
    await sampling;
    peak = Math.max(peak, (await settle()) - start);
    return { result, external: peak };
  } finally {
    clearInterval(timer);
  }
}

const MiB = 1024 * 1024;

describe('etcd snapshots', () => {
  it('checks wholeness as a stream, in pieces of any size, as it does whole', () => {
    const db = randomBytes(512 * 9);
    const file = Buffer.concat([db, createHash('sha256').update(db).digest()]);
    for (const piece of [1, 7, 31, 32, 33, 500, 4096, file.length]) {
      const check = new EtcdSnapshotCheck();
      for (let i = 0; i < file.length; i += piece) check.update(file.subarray(i, i + piece));
      expect(check.problem()).toBeUndefined();
      expect(check.sha256()).toBe(createHash('sha256').update(file).digest('hex'));
    }
    const flipped = Buffer.from(file);
    flipped[file.length - 1]! ^= 1;
    const check = new EtcdSnapshotCheck();
    for (let i = 0; i < flipped.length; i += 100) check.update(flipped.subarray(i, i + 100));
    expect(check.problem()).toBe(`its trailing sha256 does not match its ${db.length} bytes of database`);
  });

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

  it('streams a 64 MiB snapshot into sealed chunks holding one at a time, and downloads and restores it byte-identical', async () => {
    const { hh, c, base } = await snapshotCluster();
    const src = c.sim('cp1');
    src.etcdData = randomBytes(64 * MiB);
    // Pieces that do not divide the chunk size, so chunks are filled across piece boundaries.
    src.snapshotChunkBytes = 100_003;
    const file = src.etcdSnapshotFile();
    const sha256 = createHash('sha256').update(file).digest('hex');
    const fileBytes = file.length;

    const taken = await peakGrowth(async () => waitForRun(hh, (await hh.call('POST', base, { body: {} })).body.run.id));
    expect(taken.result.state, taken.result.error ?? '').toBe('succeeded');
    console.log(`etcd snapshot of ${fileBytes} bytes: peak growth arrayBuffers ${(taken.arrayBuffers / MiB).toFixed(1)} MiB, heap ${(taken.heapUsed / MiB).toFixed(1)} MiB, rss ${(taken.rss / MiB).toFixed(1)} MiB`);
    // Held whole (as before) the pieces and their concatenation alone are twice the snapshot;
    // streamed into chunks, one chunk plus what the database client takes to write a row, however
    // large the snapshot (measured: ~18 MiB for 16 MiB, ~25 MiB for 256 MiB).
    expect(taken.arrayBuffers + taken.heapUsed).toBeLessThan(40 * MiB);

    const [snap] = (await hh.call('GET', base)).body.snapshots;
    expect(snap).toMatchObject({ machine: 'cp1', sizeBytes: fileBytes, sha256 });
    const row = await hh.deps.db.select().from(etcdSnapshots).where(eq(etcdSnapshots.id, snap.id)).get();
    expect(row?.sealed).toBeNull();
    expect(row?.chunks).toBe(Math.ceil(fileBytes / SNAPSHOT_CHUNK_BYTES));
    const chunks = await hh.deps.db.select({ seq: etcdSnapshotChunks.seq }).from(etcdSnapshotChunks).where(eq(etcdSnapshotChunks.snapshotId, snap.id));
    expect(chunks.map((r) => r.seq).sort((a, b) => a - b)).toEqual([...Array(row!.chunks).keys()]);

    // The download streams: read piece by piece, hashed, never joined.
    const dl = await peakGrowth(async (sample) => {
      const res = await hh.app.request(`${base}/${snap.id}`, { headers: { authorization: `Bearer ${hh.adminToken}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-length')).toBe(String(fileBytes));
      const hash = createHash('sha256');
      let n = 0;
      for await (const piece of res.body! as unknown as AsyncIterable<Uint8Array>) {
        hash.update(piece);
        n += piece.byteLength;
        // Reading it all may never wait on a timer: sample as it goes.
        if (n % (8 * MiB) < piece.byteLength) sample();
      }
      return { n, sha256: hash.digest('hex') };
    });
    expect(dl.result).toEqual({ n: fileBytes, sha256 });
    console.log(`download of ${fileBytes} bytes: peak growth arrayBuffers ${(dl.arrayBuffers / MiB).toFixed(1)} MiB, heap ${(dl.heapUsed / MiB).toFixed(1)} MiB, rss ${(dl.rss / MiB).toFixed(1)} MiB`);
    expect(dl.arrayBuffers + dl.heapUsed).toBeLessThan(40 * MiB);

    // The restore reads chunk by chunk and uploads as the node takes it (the sim writes it to disk,
    // as a node does, so what grows here is the runner's).
    const fresh = await freshControlPlane(hh, c, 'cp4');
    const restored = await settledPeakGrowth(async () => waitForRun(hh, (await hh.call('POST', `${base}/${snap.id}/restore`, { body: { machine: 'cp4' } })).body.run.id));
    expect(restored.result.state, restored.result.error ?? '').toBe('succeeded');
    console.log(`restore of ${fileBytes} bytes: peak growth of arrayBuffers and heap ${(restored.external / MiB).toFixed(1)} MiB`);
    expect(restored.external).toBeLessThan(40 * MiB);
    expect(fresh.recoveredFrom?.equals(file)).toBe(true);
    expect(fresh.etcdData.equals(src.etcdData)).toBe(true);
  }, 120_000);

  it('keeps nothing of a stream cut off half-way, and clears chunks a dead run left behind', async () => {
    const { hh, c, base } = await snapshotCluster();
    for (const name of ['cp1', 'cp2', 'cp3']) {
      c.sim(name).etcdData = randomBytes(12 * MiB);
      c.sim(name).snapshotChunkBytes = 256 * 1024;
      c.sim(name).snapshotFault = 'cut';
    }
    const cut = await waitForRun(hh, (await hh.call('POST', base, { body: {} })).body.run.id);
    expect(cut.state).toBe('failed');
    expect(cut.error).toContain('cp1: ');
    expect(cut.error).toContain('etcd snapshot stream cut off');
    expect(await hh.deps.db.select().from(etcdSnapshots)).toEqual([]);
    expect(await hh.deps.db.select().from(etcdSnapshotChunks)).toEqual([]);

    // A runner that died mid-stream leaves chunks without a row: the next snapshot deletes them.
    await hh.deps.db.insert(etcdSnapshotChunks).values({ snapshotId: 'esnap_dead', seq: 0, clusterId: c.clusterId, sealed: 'v1:AAAA' });
    c.sim('cp1').snapshotFault = undefined;
    const ok = await waitForRun(hh, (await hh.call('POST', base, { body: {} })).body.run.id);
    expect(ok.state, ok.error ?? '').toBe('succeeded');
    const left = await hh.deps.db.selectDistinct({ id: etcdSnapshotChunks.snapshotId }).from(etcdSnapshotChunks);
    expect(left).toEqual([{ id: (await hh.call('GET', base)).body.snapshots[0].id }]);

    // Pruning takes a snapshot's chunks with it.
    const again = await waitForRun(hh, (await hh.call('POST', base, { body: { keep: 1 } })).body.run.id);
    expect(again.state, again.error ?? '').toBe('succeeded');
    const kept = (await hh.call('GET', base)).body.snapshots;
    expect(kept).toHaveLength(1);
    expect(await hh.deps.db.selectDistinct({ id: etcdSnapshotChunks.snapshotId }).from(etcdSnapshotChunks)).toEqual([{ id: kept[0].id }]);
  }, 60_000);

  it('refuses to serve or restore a snapshot whose chunk was changed in the database, and still reads a snapshot sealed whole', async () => {
    const { hh, c, base } = await snapshotCluster();
    // Three chunks: two whole, one short.
    c.sim('cp1').etcdData = randomBytes(SNAPSHOT_CHUNK_BYTES * 2.5);
    const run = await waitForRun(hh, (await hh.call('POST', base, { body: {} })).body.run.id);
    expect(run.state, run.error ?? '').toBe('succeeded');
    const [snap] = (await hh.call('GET', base)).body.snapshots;
    const bySeq = async (seq: number) => (await hh.deps.db.select().from(etcdSnapshotChunks).where(and(eq(etcdSnapshotChunks.snapshotId, snap.id), eq(etcdSnapshotChunks.seq, seq))).get())!;

    // Chunks swapped: each is whole and sealed with the right key, but bound to its place.
    const [one, two] = [await bySeq(1), await bySeq(2)];
    await hh.deps.db.update(etcdSnapshotChunks).set({ sealed: two.sealed }).where(and(eq(etcdSnapshotChunks.snapshotId, snap.id), eq(etcdSnapshotChunks.seq, 1)));
    await hh.deps.db.update(etcdSnapshotChunks).set({ sealed: one.sealed }).where(and(eq(etcdSnapshotChunks.snapshotId, snap.id), eq(etcdSnapshotChunks.seq, 2)));
    const swapped = await hh.call('GET', `${base}/${snap.id}`);
    expect(swapped.status).toBe(500);
    expect(swapped.body.error.code).toBe('snapshot_unreadable');
    expect(swapped.body.error.message).toBe(`snapshot ${snap.id}: chunk 2 of 3 does not open: it was changed in the database or does not belong there`);

    // One byte of a chunk's ciphertext changed.
    await hh.deps.db.update(etcdSnapshotChunks).set({ sealed: one.sealed }).where(and(eq(etcdSnapshotChunks.snapshotId, snap.id), eq(etcdSnapshotChunks.seq, 1)));
    const raw = Buffer.from(two.sealed.slice(3), 'base64');
    raw[raw.length - 10]! ^= 1;
    await hh.deps.db.update(etcdSnapshotChunks).set({ sealed: `v1:${raw.toString('base64')}` }).where(and(eq(etcdSnapshotChunks.snapshotId, snap.id), eq(etcdSnapshotChunks.seq, 2)));
    const flipped = await hh.call('GET', `${base}/${snap.id}`);
    expect(flipped.status).toBe(500);
    expect(flipped.body.error.message).toContain('chunk 3 of 3 does not open');

    const fresh = await freshControlPlane(hh, c, 'cp4');
    const rr = await waitForRun(hh, (await hh.call('POST', `${base}/${snap.id}/restore`, { body: { machine: 'cp4' } })).body.run.id);
    expect(rr.state).toBe('failed');
    expect(rr.error).toBe(`restore on cp4: snapshot ${snap.id}: chunk 3 of 3 does not open: it was changed in the database or does not belong there; nothing was bootstrapped`);
    expect(fresh.bootstrapped).toBe(false);
    expect(fresh.recoveredFrom).toBeUndefined();
    expect(fresh.calls.map((x) => x.method)).not.toContain('Bootstrap');

    // A missing chunk is named too.
    await hh.deps.db.delete(etcdSnapshotChunks).where(and(eq(etcdSnapshotChunks.snapshotId, snap.id), eq(etcdSnapshotChunks.seq, 2)));
    expect((await hh.call('GET', `${base}/${snap.id}`)).body.error.message).toBe(`snapshot ${snap.id}: chunk 3 of 3 is missing`);

    // A row from before chunks: the snapshot sealed whole in `sealed`.
    const db = randomBytes(4096);
    const file = Buffer.concat([db, createHash('sha256').update(db).digest()]);
    await hh.deps.db.insert(etcdSnapshots).values({
      id: 'esnap_old', clusterId: c.clusterId, createdAt: 1, machineName: 'cp1', sizeBytes: file.length, revision: '1', sha256: createHash('sha256').update(file).digest('hex'),
      trigger: 'manual', runId: null, sealed: hh.deps.sealer.seal(file, snapshotSealContext(c.clusterId, 'esnap_old')),
    });
    expect((await download(hh, `${base}/esnap_old`)).equals(file)).toBe(true);
    const rr2 = await waitForRun(hh, (await hh.call('POST', `${base}/esnap_old/restore`, { body: { machine: 'cp4' } })).body.run.id);
    expect(rr2.state, rr2.error ?? '').toBe('succeeded');
    expect(fresh.recoveredFrom?.equals(file)).toBe(true);
  }, 60_000);
});
