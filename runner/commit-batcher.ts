import type { Db, DbStatement as Statement } from '../db/client.ts';

/**
 * The same change to one row that many tasks make, each to their own row (a node's state after
 * its apply). Those of one turn with the same `key` go out as one statement over all their ids.
 */
export interface RowWrite {
  /** The table of the row: two writes with the same table and id touch the same row. */
  table: string;
  /** Equal keys mean `build` makes the same change, only to other rows (of the same table). */
  key: string;
  id: string;
  build(ids: string[]): Statement;
}

interface Pending {
  row: RowWrite;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface CommitBatcher {
  /** Resolves once the row write is committed, merged with the others of this turn that share its key. */
  writeRow(row: RowWrite): Promise<void>;
}

/**
 * The turn's writes as statements, in order, writes of one key merged into the first one's place.
 * A row written twice in the turn starts a new group, so no write ever moves before one it
 * followed on the same row.
 */
function statementsOf(batch: Pending[]): Statement[] {
  type Group = { build: RowWrite['build']; ids: string[] };
  const groups: Group[] = [];
  const open = new Map<string, Group>();
  const seen = new Set<string>();
  for (const { row: { table, key, id, build } } of batch) {
    const row = `${table}\0${id}`;
    const group = open.get(`${table}\0${key}`);
    if (group && !seen.has(row)) group.ids.push(id);
    else {
      const fresh = { build, ids: [id] };
      open.set(`${table}\0${key}`, fresh);
      groups.push(fresh);
    }
    seen.add(row);
  }
  return groups.map((g) => g.build(g.ids));
}

const alone = (p: Pending): Statement => p.row.build([p.row.id]);

/**
 * Group commit for writes made by many concurrent tasks of one run (a cluster push's nodes): each
 * commit syncs the database file and blocks the process while it does, so statements queued in
 * the same turn of the event loop go out in one transaction. If that transaction fails, each
 * write is retried alone, so one bad write fails only its own caller.
 */
export function createCommitBatcher(db: Db): CommitBatcher {
  let queue: Pending[] = [];

  async function flush(): Promise<void> {
    const batch = queue;
    queue = [];
    try {
      await db.batch(statementsOf(batch) as [Statement, ...Statement[]]);
      for (const p of batch) p.resolve();
    } catch {
      for (const p of batch) {
        try {
          await alone(p);
          p.resolve();
        } catch (err) {
          p.reject(err);
        }
      }
    }
  }

  return {
    writeRow: (row) =>
      new Promise<void>((resolve, reject) => {
        if (queue.length === 0) setImmediate(() => void flush());
        queue.push({ row, resolve, reject });
      }),
  };
}
