import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { COLLECT_KIND, scheduledCollect } from '../functions/collect/job.ts';
import { runCollectPass } from '../runner/jobs/collect/pass.ts';
import { cronJobs, executors } from '../runner/jobs/registry.ts';
import { createWorker } from '../runner/worker.ts';
import { waitForRun, createHarness, type Harness } from './support/harness.ts';
import { startSimCluster, type SimCluster } from './support/collect-fleet.ts';

let h: Harness;
const fleets: SimCluster[] = [];
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => {
  await Promise.all(fleets.splice(0).map((f) => f.stop()));
  await h.close();
});


const collectRunCount = async () =>
  Number((await h.deps.database.client.execute({ sql: 'SELECT count(*) AS n FROM runs WHERE kind = ?', args: [COLLECT_KIND] })).rows[0]!.n);

describe('collect runs, API and metrics', () => {
  it('refuses an overlapping pass (POST 409, cron tick skipped) and runs one through the worker', async () => {
    const fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'cp1', role: 'controlplane' }] });
    fleets.push(fleet);
    const job = cronJobs(h.deps).find((j) => j.name === 'collect');
    expect(job?.pattern).toBe(h.deps.settings.collectCron);

    const first = await h.call('POST', '/v1/collect');
    expect(first.status).toBe(202);
    expect(first.body.run).toMatchObject({ kind: 'collect', state: 'queued' });
    const second = await h.call('POST', '/v1/collect', { body: { cluster: fleet.clusterId } });
    expect(second.status).toBe(409);
    expect(second.body.error).toMatchObject({ code: 'run_active', details: { activeRun: first.body.run.id } });
    expect(await scheduledCollect(h.deps)).toBeUndefined();
    await job!.run();
    expect(await collectRunCount()).toBe(1);

    const worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'test', leaseMs: 30_000, concurrency: 2, pollMs: 20 });
    worker.start();
    try {
      const done = await waitForRun(h, first.body.run.id);
      expect(done.state).toBe('succeeded');
      expect(done.result).toMatchObject({ clusters: 1, machines: 1, reached: 1 });
      const events = await h.call('GET', `/v1/runs/${first.body.run.id}/events`);
      expect(JSON.stringify(events.body)).toContain('cluster c1: healthy');
      // Once the pass is over, the cron may enqueue the next one.
      const next = await scheduledCollect(h.deps);
      expect(next?.kind).toBe('collect');
      expect((await waitForRun(h, next!.id)).state).toBe('succeeded');
    } finally {
      await worker.stop(5_000);
    }
    expect((await h.call('GET', `/v1/clusters/${fleet.clusterId}/health`)).body.state).toBe('healthy');
  });

  it('exports node and cluster gauges on /metrics', async () => {
    h.deps.settings.collectDeadlineMs = 400;
    const fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'cp1', role: 'controlplane' }, { name: 'w1', role: 'worker' }] });
    fleets.push(fleet);
    fleet.machines['w1']!.sim!.blackhole(true);
    await runCollectPass(h.deps);
    const res = await h.app.request('/metrics', { headers: { authorization: `Bearer ${h.adminToken}` } });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('rezus_cluster_health{tenant="home",cluster="c1",state="degraded"} 1');
    expect(text).toContain('rezus_cluster_health{tenant="home",cluster="c1",state="healthy"} 0');
    expect(text).toContain('rezus_machine_health{tenant="home",cluster="c1",machine="w1",role="worker",state="unreachable"} 1');
    expect(text).toContain('rezus_machine_health{tenant="home",cluster="c1",machine="cp1",role="controlplane",state="healthy"} 1');
    expect(text).toContain(`rezus_node_memory_used_bytes{tenant="home",cluster="c1",machine="cp1"} ${(8_148_000 - 6_900_000) * 1024}`);
    expect(text).toContain('rezus_node_talos_up{tenant="home",cluster="c1",machine="w1"} 0');
    expect(text).toContain('rezus_cluster_etcd_healthy_members{tenant="home",cluster="c1"} 1');
    // One HELP/TYPE block per family.
    expect(text.match(/# TYPE rezus_node_load_1 gauge/g)).toHaveLength(1);
    // Running byte totals only grow: counters, with the value as read from the node.
    expect(text).toMatch(/# TYPE rezus_node_disk_read_bytes_total counter/);
    expect(text).toMatch(/rezus_node_disk_read_bytes_total\{tenant="home",cluster="c1",machine="cp1"\} \d+/);
    // Process metrics come with prom-client.
    expect(text).toMatch(/# TYPE rezus_process_resident_memory_bytes gauge/);
    // A machine that is gone leaves no series behind at the next scrape.
    await h.call('DELETE', `/v1/clusters/${fleet.clusterId}/machines/${fleet.machines['w1']!.id}`);
    const after = await (await h.app.request('/metrics', { headers: { authorization: `Bearer ${h.adminToken}` } })).text();
    expect(after).not.toContain('machine="w1"');
    expect(after).toContain('machine="cp1"');
  });

  it('keeps tenants apart: health, samples and collect requests', async () => {
    const a = await startSimCluster(h, { tenant: 'alpha', machines: [{ name: 'cp1', role: 'controlplane' }] });
    fleets.push(a);
    const b = await startSimCluster(h, { tenant: 'beta', machines: [{ name: 'cp1', role: 'controlplane' }] });
    fleets.push(b);
    const token = (await h.call('POST', `/v1/tenants/${a.tenantId}/tokens`, { body: { name: 'rw' } })).body.token as string;
    const readOnly = (await h.call('POST', `/v1/tenants/${a.tenantId}/tokens`, { body: { name: 'ro', scopes: ['read'] } })).body.token as string;

    expect((await h.call('GET', `/v1/clusters/${a.clusterId}/health`, { token })).status).toBe(200);
    expect((await h.call('GET', `/v1/clusters/${b.clusterId}/health`, { token })).status).toBe(404);
    expect((await h.call('GET', `/v1/clusters/${b.clusterId}/machines/${b.machines['cp1']!.id}/samples`, { token })).status).toBe(404);
    // Another cluster's machine under one's own cluster is not found either.
    expect((await h.call('GET', `/v1/clusters/${a.clusterId}/machines/${b.machines['cp1']!.id}/samples`, { token })).status).toBe(404);
    expect((await h.call('POST', '/v1/collect', { token, body: { cluster: b.clusterId } })).status).toBe(404);
    expect((await h.call('POST', '/v1/collect', { token: readOnly })).status).toBe(403);

    const res = await h.call('POST', '/v1/collect', { token });
    expect(res.status).toBe(202);
    // A tenant's request becomes (or joins) a fleet pass; the answer names no run.
    expect(res.body).toEqual({ queued: true, coalesced: false });
    const summary = await runCollectPass(h.deps, { tenantId: a.tenantId });
    expect(summary.clusters).toBe(1);
    expect((await h.call('GET', `/v1/clusters/${a.clusterId}/health`, { token })).body.state).toBe('healthy');
    expect((await h.call('GET', `/v1/clusters/${b.clusterId}/health`)).body.reasons).toEqual(['not collected yet']);
    const m = await h.call('GET', '/metrics', { token });
    expect(m.status).toBe(403);
  });

  it('validates its inputs', async () => {
    const fleet = await startSimCluster(h, { tenant: 'home', machines: [{ name: 'cp1', role: 'controlplane' }] });
    fleets.push(fleet);
    const base = `/v1/clusters/${fleet.clusterId}/machines/${fleet.machines['cp1']!.id}/samples`;
    expect((await h.call('GET', `${base}?since=yesterday`)).status).toBe(400);
    expect((await h.call('GET', `${base}?resolution=minute`)).status).toBe(400);
    expect((await h.call('GET', `${base}?bogus=1`)).status).toBe(400);
    expect((await h.call('GET', `${base}?since=2026-01-01T00:00:00Z&metric=load.1`)).status).toBe(200);
    expect((await h.call('POST', '/v1/collect', { body: { cluster: 'nope' } })).status).toBe(400);
    expect((await h.call('POST', '/v1/collect', { body: { extra: 1 } })).status).toBe(400);
    expect(await collectRunCount()).toBe(0);
  });
});
