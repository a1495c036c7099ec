import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eq, inArray } from 'drizzle-orm';
import { machines, runs } from '../db/schema/index.ts';
import type { Db } from '../db/client.ts';
import { createCommitBatcher, type RowWrite } from '../runner/commit-batcher.ts';
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

  /** A write of its own: a key no other write shares, so it is never merged. */
  const single = (id: string, statement: ReturnType<RowWrite['build']>): RowWrite => ({ table: 'machines', key: `only ${id}`, id, build: () => statement });

  const stateOf = async (id: string) => (await h.deps.db.select().from(machines).where(eq(machines.id, id)).get())?.state;

  it('commits the writes of separate tasks in one event-loop turn as one transaction', async () => {
    const { db, batches } = counted();
    const writes = createCommitBatcher(db);
    // Three tasks woken in the same turn, as a cluster push's nodes are by their replies.
    const done = await new Promise<Promise<void>[]>((resolve) => {
      const out: Promise<void>[] = [];
      for (const id of ids) {
        setImmediate(() => {
          out.push(writes.writeRow(single(id, h.deps.db.update(machines).set({ state: 'configured' }).where(eq(machines.id, id)))));
          if (out.length === ids.length) resolve(out);
        });
      }
    });
    await Promise.all(done);
    expect(batches).toEqual([3]);
    for (const id of ids) expect(await stateOf(id)).toBe('configured');
    // A later write is its own transaction.
    await writes.writeRow(single(ids[0]!, h.deps.db.update(machines).set({ state: 'applied' }).where(eq(machines.id, ids[0]!))));
    expect(batches).toEqual([3, 1]);
  });

  it('fails only the bad write when its transaction fails; the others are committed', async () => {
    const writes = createCommitBatcher(counted().db);
    const good = writes.writeRow(single(ids[0]!, h.deps.db.update(machines).set({ state: 'configured' }).where(eq(machines.id, ids[0]!))));
    // A second machine named cp2 in the cluster breaks the unique index.
    const bad = writes.writeRow(
      single('m_dup', h.deps.db.insert(machines).values({ id: 'm_dup', clusterId, name: 'cp2', role: 'worker', provider: 'metal', state: 'pending', patches: [], createdAt: 1, updatedAt: 1 })),
    );
    const also = writes.writeRow(single(ids[2]!, h.deps.db.update(machines).set({ state: 'configured' }).where(eq(machines.id, ids[2]!))));
    await expect(bad).rejects.toThrow();
    await Promise.all([good, also]);
    expect(await stateOf(ids[0]!)).toBe('configured');
    expect(await stateOf(ids[2]!)).toBe('configured');
    expect(await h.deps.db.select().from(machines).where(eq(machines.id, 'm_dup')).get()).toBeUndefined();
  });

  const stateWrite = (id: string, state: string): RowWrite => ({
    table: 'machines',
    key: `state ${state}`,
    id,
    build: (rows) => h.deps.db.update(machines).set({ state }).where(inArray(machines.id, rows)),
  });

  it('merges the row writes of one turn that share a key into one statement', async () => {
    const { db, batches } = counted();
    const writes = createCommitBatcher(db);
    await Promise.all([
      writes.writeRow(stateWrite(ids[0]!, 'applied')),
      writes.writeRow(stateWrite(ids[1]!, 'configured')),
      writes.writeRow(stateWrite(ids[2]!, 'applied')),
    ]);
    // Two keys: two statements, one transaction.
    expect(batches).toEqual([2]);
    expect([await stateOf(ids[0]!), await stateOf(ids[1]!), await stateOf(ids[2]!)]).toEqual(['applied', 'configured', 'applied']);
  });

  it('keeps the order of writes to one row: a second write of it is not merged ahead of the first', async () => {
    const { db, batches } = counted();
    const writes = createCommitBatcher(db);
    await Promise.all([
      writes.writeRow(stateWrite(ids[0]!, 'applied')),
      writes.writeRow(stateWrite(ids[0]!, 'configured')),
      // Merging this into the first group would run it before 'configured'.
      writes.writeRow(stateWrite(ids[0]!, 'applied')),
      writes.writeRow(stateWrite(ids[1]!, 'applied')),
    ]);
    expect(batches).toEqual([3]);
    expect(await stateOf(ids[0]!)).toBe('applied');
    expect(await stateOf(ids[1]!)).toBe('applied');
  });

  it('retries merged row writes one by one when their transaction fails', async () => {
    const writes = createCommitBatcher(counted().db);
    // Renaming both to cp9 breaks the unique name index only when done together.
    const rename = (id: string): RowWrite => ({
      table: 'machines',
      key: 'rename',
      id,
      build: (rows) => h.deps.db.update(machines).set({ name: 'cp9' }).where(inArray(machines.id, rows)),
    });
    const results = await Promise.allSettled([writes.writeRow(rename(ids[0]!)), writes.writeRow(rename(ids[1]!)), writes.writeRow(stateWrite(ids[2]!, 'configured'))]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const name = async (id: string) => (await h.deps.db.select().from(machines).where(eq(machines.id, id)).get())?.name;
    expect([await name(ids[0]!), await name(ids[1]!)]).toEqual(['cp9', 'cp2']);
    expect(await stateOf(ids[2]!)).toBe('configured');
  });

  it('merges writes to two tables made pairwise by each task (a node state and its mesh delivery)', async () => {
    const runIds: string[] = [];
    for (let i = 0; i < 3; i++) runIds.push((await h.deps.jobs.enqueue({ kind: 'x', clusterId, exclusive: false })).id);
    const noteWrite = (id: string): RowWrite => ({
      table: 'runs',
      key: 'note',
      id,
      build: (rows) => h.deps.db.update(runs).set({ error: 'noted' }).where(inArray(runs.id, rows)),
    });
    const { db, batches } = counted();
    const writes = createCommitBatcher(db);
    await Promise.all(ids.flatMap((id, i) => [writes.writeRow(stateWrite(id, 'applied')), writes.writeRow(noteWrite(runIds[i]!))]));
    expect(batches).toEqual([2]);
    for (const id of ids) expect(await stateOf(id)).toBe('applied');
    for (const id of runIds) expect((await h.deps.jobs.get(id))?.error).toBe('noted');
  });
});
