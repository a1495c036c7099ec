import { existsSync } from 'node:fs';
import { readdir, readFile, readlink, rm } from 'node:fs/promises';
import { eq } from 'drizzle-orm';
import { machines, stateCredentials, stateLocks } from '../db/schema/index.ts';
import { runDirFor } from '../lib/tofu/workspace.ts';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initCacheDirFor } from '../lib/tofu/workspace.ts';
import { executors, onRunsInterrupted } from '../runner/jobs/registry.ts';
import { createWorker, type Worker } from '../runner/worker.ts';
import { createHarness, type Harness } from './support/harness.ts';
import { listen } from './support/serve.ts';

let h: Harness;
let worker: Worker;
let server: Awaited<ReturnType<typeof listen>>;

beforeAll(async () => {
  h = await createHarness();
  server = await listen(h);
  worker = createWorker({ deps: h.deps, executors: executors(), workerId: 'w1', leaseMs: 10_000, concurrency: 1, pollMs: 50, onInterrupted: (ids) => onRunsInterrupted(h.deps, ids) });
  worker.start();
});
afterAll(async () => {
  await worker.stop(0);
  await server.close();
  await h.close();
});

async function provisioned(clusterId: string, expected = 'succeeded') {
  const res = await h.call('POST', `/v1/clusters/${clusterId}/provision`, { body: { mode: 'apply' } });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  const end = Date.now() + 90_000;
  for (;;) {
    const run = await h.deps.jobs.get(res.body.run.id);
    if (run && !['queued', 'running'].includes(run.state)) {
      expect(run.state, run.error ?? '').toBe(expected);
      const events = await h.deps.jobs.events(run.id);
      return { run, types: events.map((e) => e.type), events };
    }
    if (Date.now() > end) throw new Error(`run ${res.body.run.id} did not end`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) if (e.isFile()) out.push(path.join(e.parentPath, e.name));
  return out;
}

describe('a cluster keeps its tofu init across runs (each run has its own work dir)', () => {
  let tenantId: string;
  let clusterId: string;
  let cache: string;

  beforeAll(async () => {
    tenantId = (await h.call('POST', '/v1/tenants', { body: { name: 'home' } })).body.id;
    const c = await h.call('POST', '/v1/clusters', { body: { tenant: tenantId, name: 'lab', endpoint: 'https://[2001:db8::1]:6443' } });
    clusterId = c.body.id;
    for (const [i, name] of ['cp1', 'w1'].entries()) {
      await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name, role: i === 0 ? 'controlplane' : 'worker', provider: 'local' } });
    }
    cache = initCacheDirFor(h.deps.settings.dataDir, tenantId, clusterId);
  });

  it('runs init on the first run, re-uses it on the next, and keeps no credential in it', async () => {
    const first = await provisioned(clusterId);
    expect(first.types).toContain('provision.init');
    expect(first.types).not.toContain('provision.init_reused');
    const snapshot = await readlink(path.join(cache, 'current'));
    const kept = await filesUnder(path.join(cache, snapshot));
    expect(kept.some((f) => f.endsWith(path.join('.terraform', 'terraform.tfstate')))).toBe(true);
    // The backend settings are kept; the run's credential reaches tofu through the environment only.
    for (const f of kept) {
      const text = await readFile(f, 'utf8');
      expect(text).not.toMatch(/"password"\s*:\s*"[^"]/);
      expect(text).not.toContain(first.run.id);
    }

    await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'w2', role: 'worker', provider: 'local' } });
    const second = await provisioned(clusterId);
    expect(second.types).toContain('provision.init_reused');
    expect(second.run.result).toMatchObject({ summary: { add: 1, change: 0, destroy: 0 } });
    // Every event is stored, in order, stamped when it happened (not when its batch was written).
    const seqs = second.events.map((e) => e.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(second.types.at(-1)).toBe('succeeded');
    expect(second.types.filter((t) => t === 'tofu.apply_complete')).toHaveLength(1);
    const ats = second.events.map((e) => e.at);
    expect(ats).toEqual([...ats].sort((a, b) => a - b));
  });

  it('initialises again when the modules change, and when the kept init is gone', async () => {
    const patched = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { providerSettings: { local: { apply_delay_seconds: 0 } } } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const changed = await provisioned(clusterId);
    expect(changed.types).not.toContain('provision.init_reused');
    expect((await provisioned(clusterId)).types).toContain('provision.init_reused');

    await rm(cache, { recursive: true, force: true });
    const lost = await provisioned(clusterId);
    expect(lost.types).not.toContain('provision.init_reused');
    expect(lost.run.result).toMatchObject({ summary: { add: 0, change: 0, destroy: 0 } });
    expect((await provisioned(clusterId)).types).toContain('provision.init_reused');
  });

  it('keeps the inits of different clusters apart', async () => {
    const other = await h.call('POST', '/v1/clusters', { body: { tenant: tenantId, name: 'lab2', endpoint: 'https://[2001:db8::1]:6443' } });
    await h.call('POST', `/v1/clusters/${other.body.id}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'local' } });
    const first = await provisioned(other.body.id);
    expect(first.types).not.toContain('provision.init_reused');
    const otherCache = initCacheDirFor(h.deps.settings.dataDir, tenantId, other.body.id);
    expect(otherCache).not.toBe(cache);
    const kept = await readFile(path.join(otherCache, await readlink(path.join(otherCache, 'current')), '.terraform', 'terraform.tfstate'), 'utf8');
    expect(kept).toContain(`/v1/state/${tenantId}/${other.body.id}`);
  });

  it('ends a run whose config no longer renders (init started meanwhile is stopped) and leaves nothing behind', async () => {
    const [m] = await h.deps.db.select().from(machines).where(eq(machines.clusterId, clusterId)).limit(1);
    // The API refuses such a patch; one stored by an older version reaches the run.
    await h.deps.db.update(machines).set({ patches: [{ machine: { network: { hostname: 'other' } } }] }).where(eq(machines.id, m!.id));
    try {
      await rm(cache, { recursive: true, force: true });
      const failed = await provisioned(clusterId, 'failed');
      expect(failed.run.error).toMatch(/patches: /);
      expect(await h.deps.db.select().from(stateCredentials).where(eq(stateCredentials.runId, failed.run.id))).toEqual([]);
      expect(await h.deps.db.select().from(stateLocks).where(eq(stateLocks.clusterId, clusterId))).toEqual([]);
      expect(existsSync(runDirFor(h.deps.settings.dataDir, failed.run.id))).toBe(false);
    } finally {
      await h.deps.db.update(machines).set({ patches: m!.patches }).where(eq(machines.id, m!.id));
    }
    expect((await provisioned(clusterId)).run.state).toBe('succeeded');
  });
});
