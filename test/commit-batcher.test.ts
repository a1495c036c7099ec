import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { machines } from '../db/schema/index.ts';
import type { Db } from '../db/client.ts';
import { createCommitBatcher } from '../runner/commit-batcher.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';

describe('commit batcher', () => {
  let h: Harness;
  let ids: string[];
  let clusterId: string;
  beforeEach(async () => {
    h = await createHarness();
    ({ clusterId } = await seedCluster(h));
    ids = [];
    for (const name of ['cp1', 'cp2', 'cp3']) {
      const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name, role: 'controlplane', provider: 'metal', address: '2001:db8::10' } });
      ids.push(m.body.id);
    }
  });
  afterEach(async () => h.close());

  /** The harness database, counting its transactions. */
  function counted(): { db: Db; batches: number[] } {
    const batches: number[] = [];
    const db = {
      batch: (items: unknown[]) => {
        batches.push(items.length);
        return h.deps.db.batch(items as unknown as Parameters<Db['batch']>[0]);
      },
    } as unknown as Db;
    return { db, batches };
  }

  const stateOf = async (id: string) => (await h.deps.db.select().from(machines).where(eq(machines.id, id)).get())?.state;

  it('commits the writes of separate tasks in one event-loop turn as one transaction', async () => {
    const { db, batches } = counted();
    const writes = createCommitBatcher(db);
    // Three tasks woken in the same turn, as a cluster push's nodes are by their replies.
    const done = await new Promise<Promise<void>[]>((resolve) => {
      const out: Promise<void>[] = [];
      for (const id of ids) {
        setImmediate(() => {
          out.push(writes.write(h.deps.db.update(machines).set({ state: 'configured' }).where(eq(machines.id, id))));
          if (out.length === ids.length) resolve(out);
        });
      }
    });
    await Promise.all(done);
    expect(batches).toEqual([3]);
    for (const id of ids) expect(await stateOf(id)).toBe('configured');
    // A later write is its own transaction.
    await writes.write(h.deps.db.update(machines).set({ state: 'applied' }).where(eq(machines.id, ids[0]!)));
    expect(batches).toEqual([3, 1]);
  });

  it('fails only the bad write when its transaction fails; the others are committed', async () => {
    const writes = createCommitBatcher(counted().db);
    const good = writes.write(h.deps.db.update(machines).set({ state: 'configured' }).where(eq(machines.id, ids[0]!)));
    // A second machine named cp2 in the cluster breaks the unique index.
    const bad = writes.write(
      h.deps.db.insert(machines).values({ id: 'm_dup', clusterId, name: 'cp2', role: 'worker', provider: 'metal', state: 'pending', patches: [], createdAt: 1, updatedAt: 1 }),
    );
    const also = writes.write(h.deps.db.update(machines).set({ state: 'configured' }).where(eq(machines.id, ids[2]!)));
    await expect(bad).rejects.toThrow();
    await Promise.all([good, also]);
    expect(await stateOf(ids[0]!)).toBe('configured');
    expect(await stateOf(ids[2]!)).toBe('configured');
    expect(await h.deps.db.select().from(machines).where(eq(machines.id, 'm_dup')).get()).toBeUndefined();
  });
});
