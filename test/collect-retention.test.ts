import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { enqueueCollect } from '../functions/collect/job.ts';
import { runCollectPass } from '../runner/jobs/collect/pass.ts';
import { machineSparkline } from '../functions/collect/views.ts';
import { createHarness, manualClock, type Harness } from './support/harness.ts';
import { startSimCluster, type SimCluster } from './support/collect-fleet.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

let h: Harness;
let fleet: SimCluster | undefined;
const clock = manualClock();
const h0 = clock.now();
beforeEach(async () => {
  clock.set(h0);
  h = await createHarness({ clock });
});
afterEach(async () => {
  await fleet?.stop();
  fleet = undefined;
  await h.close();
});

async function hourly(machineId: string, metric: string) {
  const rs = await h.deps.database.client.execute({
    sql: 'SELECT hour, avg, min, max, count FROM health_hourly WHERE machine_id = ? AND metric = ? ORDER BY hour',
    args: [machineId, metric],
  });
  return rs.rows.map((r) => ({ hour: Number(r.hour), avg: Number(r.avg), min: Number(r.min), max: Number(r.max), count: Number(r.count) }));
}
async function rawTimes(machineId: string, metric: string) {
  const rs = await h.deps.database.client.execute({ sql: 'SELECT ts FROM health_samples WHERE machine_id = ? AND metric = ? ORDER BY ts', args: [machineId, metric] });
  return rs.rows.map((r) => Number(r.ts));
}
async function passAt(ms: number) {
  clock.set(ms);
  await runCollectPass(h.deps);
}

describe('collect retention', () => {
  it('folds raw samples past raw retention into hourly aggregates, merges partial hours, prunes old hours and runs', async () => {
    fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'cp1', role: 'controlplane' }, { name: 'w1', role: 'worker' }] });
    const w1 = fleet.machines['w1']!.id;

    // An old finished collect run, which retention must remove.
    const old = await enqueueCollect(h.deps);
    await h.deps.jobs.claim({ workerId: 't', leaseMs: 1000, kinds: ['collect'] });
    await h.deps.jobs.finish(old.id, 't', { state: 'succeeded' });

    await passAt(h0 + 10 * MIN); // ready → 1
    fleet.kube.setNode('w1', { ready: false });
    await passAt(h0 + 20 * MIN); // 0
    fleet.kube.setNode('w1', { ready: true });
    await passAt(h0 + 40 * MIN); // 1
    expect(await hourly(w1, 'kube.ready')).toEqual([]);

    // Cutoff h0+15m: only the first sample is folded.
    await passAt(h0 + DAY + 15 * MIN);
    expect(await hourly(w1, 'kube.ready')).toEqual([{ hour: h0, avg: 1, min: 1, max: 1, count: 1 }]);
    expect(await rawTimes(w1, 'kube.ready')).toEqual([h0 + 20 * MIN, h0 + 40 * MIN, h0 + DAY + 15 * MIN]);
    expect((await h.call('GET', `/v1/runs/${old.id}`)).status).toBe(404);

    // Cutoff h0+50m: the other two join the same hour, merged with what was folded before.
    await passAt(h0 + DAY + 50 * MIN);
    const [agg] = await hourly(w1, 'kube.ready');
    expect(agg).toMatchObject({ hour: h0, min: 0, max: 1, count: 3 });
    expect(agg!.avg).toBeCloseTo(2 / 3, 12);
    expect(await rawTimes(w1, 'kube.ready')).toEqual([h0 + DAY + 15 * MIN, h0 + DAY + 50 * MIN]);

    // Older than raw retention: hourly by default, including the hour still held as raw samples.
    const base = `/v1/clusters/${fleet.clusterId}/machines/${w1}/samples`;
    const hour = await h.call('GET', `${base}?since=${h0}&metric=kube.ready`);
    expect(hour.body.resolution).toBe('hour');
    expect(hour.body.points).toEqual([
      { metric: 'kube.ready', ts: h0, avg: agg!.avg, min: 0, max: 1, count: 3 },
      { metric: 'kube.ready', ts: h0 + DAY, avg: 1, min: 1, max: 1, count: 2 },
    ]);
    const raw = await h.call('GET', `${base}?since=${h0}&metric=kube.ready&resolution=raw`);
    expect(raw.body.points.map((p: { ts: number }) => p.ts)).toEqual([h0 + DAY + 15 * MIN, h0 + DAY + 50 * MIN]);
    const recent = await h.call('GET', `${base}?since=${h0 + DAY}&metric=kube.ready&resolution=hour`);
    expect(recent.body.points).toEqual([{ metric: 'kube.ready', ts: h0 + DAY, avg: 1, min: 1, max: 1, count: 2 }]);
    expect(await machineSparkline(h.deps, w1, 'kube.ready', h0)).toEqual([agg!.avg, 1, 1]);
    expect(await machineSparkline(h.deps, w1, 'kube.ready', h0 + DAY)).toEqual([1, 1]);

    // 31 days on, the first hour is gone; the later ones were folded and stay.
    await passAt(h0 + 31 * DAY - HOUR);
    expect((await hourly(w1, 'kube.ready')).map((r) => r.hour)).toEqual([h0 + DAY]);
    expect(await rawTimes(w1, 'kube.ready')).toEqual([h0 + 31 * DAY - HOUR]);
  });
});
