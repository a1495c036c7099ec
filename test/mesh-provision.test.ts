// A cloud machine of a mesh cluster gets its WireguardConfig in user_data (real tofu on
// modules/local), and once the apply has created it, the endpoint it dials is recorded.
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { mintStateCredential } from '../functions/state/credentials.ts';
import { loadPeer } from '../lib/mesh/store.ts';
import { executors } from '../runner/jobs/registry.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { createHarness, waitForRun, type Harness } from './support/harness.ts';
import { listen } from './support/serve.ts';
import { basic, stateClient } from './support/state.ts';

let h: Harness;
let worker: Worker;
let server: Awaited<ReturnType<typeof listen>>;

beforeEach(async () => {
  h = await createHarness();
  server = await listen(h);
  worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'w1', leaseMs: 5000, concurrency: 1, pollMs: 50 });
  worker.start();
});
afterEach(async () => {
  await worker.stop(0);
  await server.close();
  await h.close();
});


it('user_data carries the mesh document; the apply records what the node dials; an endpoint change is a planned change', async () => {
  const t = await h.call('POST', '/v1/tenants', { body: { name: 'home' } });
  const c = await h.call('POST', '/v1/clusters', { body: { tenant: t.body.id, name: 'lab', endpoint: 'https://[2001:db8::1]:6443', providerSettings: { local: { apply_delay_seconds: 0 } } } });
  const clusterId = c.body.id as string;
  const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'local' } });
  expect((await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820' } })).status).toBe(200);
  expect((await loadPeer(h.deps.db, m.body.id))?.deliveredEndpoint).toBeNull();

  const applied = await waitForRun(h, (await h.call('POST', `/v1/clusters/${clusterId}/provision`, { body: { mode: 'apply' } })).body.run.id);
  expect(applied.state, applied.error ?? '').toBe('succeeded');
  expect((await loadPeer(h.deps.db, m.body.id))?.deliveredEndpoint).toBe('203.0.113.7:51820');

  // The module keeps the hash of user_data: it is exactly the config served for the machine, mesh document included.
  const config = (await h.call('GET', `/v1/clusters/${clusterId}/machines/${m.body.id}/config`)).body as string;
  expect(config).toContain('kind: WireguardConfig');
  const other = await h.deps.jobs.enqueue({ kind: 'manual', tenantId: t.body.id, clusterId, exclusive: false });
  const cred = await mintStateCredential(h.deps, { runId: other.id, tenantId: t.body.id, clusterId, ttlMs: 60_000 });
  const state = (await stateClient(h, t.body.id, clusterId, basic(cred)).get()).json as { resources: { type: string; instances: { attributes: { input: { value: { user_data_hash: string } } } }[] }[] };
  const hashes = state.resources.filter((r) => r.type === 'terraform_data').flatMap((r) => r.instances.map((i) => i.attributes.input.value.user_data_hash));
  expect(hashes).toEqual([createHash('sha256').update(config).digest('hex')]);

  // Rendering is deterministic: nothing to do until the endpoint moves.
  const noop = await waitForRun(h, (await h.call('POST', `/v1/clusters/${clusterId}/provision`, { body: { mode: 'plan' } })).body.run.id);
  expect(noop.result).toMatchObject({ summary: { add: 0, change: 0, destroy: 0 } });
  // The node holds the old endpoint, so the change queues its re-push (nothing answers here: canceled).
  const put = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.9:51820' } });
  expect(put.body.repush).toMatchObject({ machines: 1 });
  expect((await h.call('POST', `/v1/runs/${put.body.repush.run}/cancel`)).status).toBeLessThan(300);
  await waitForRun(h, put.body.repush.run);
  const moved = await waitForRun(h, (await h.call('POST', `/v1/clusters/${clusterId}/provision`, { body: { mode: 'plan' } })).body.run.id);
  expect(moved.result).toMatchObject({ summary: { change: 1 } });
}, 60_000);
