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
  write: { statement: Statement } | { row: RowWrite };
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface CommitBatcher {
  /** Resolves once the statement is committed, together with the others of this event-loop turn. */
  write(statement: Statement): Promise<void>;
  /** Resolves once the row write is committed, merged with the others of this turn that share its key. */
  writeRow(row: RowWrite): Promise<void>;
}

/**
 * The turn's writes as statements, in order, row writes of one key merged into the first one's
 * place. A row written twice in the turn, or a plain statement in between (it may touch
 * anything), starts a new group, so no write ever moves before one it followed on the same row.
 */
function statementsOf(batch: Pending[]): Statement[] {
  type Group = { build: RowWrite['build']; ids: string[] };
  const slots: Array<{ statement: Statement } | { group: Group }> = [];
  const open = new Map<string, Group>();
  const seen = new Set<string>();
  for (const { write } of batch) {
    if ('statement' in write) {
      slots.push(write);
      open.clear();
      continue;
    }
    const { table, key, id, build } = write.row;
    const row = `${table}\0${id}`;
    const group = open.get(`${table}\0${key}`);
    if (group && !seen.has(row)) group.ids.push(id);
    else {
      const fresh = { build, ids: [id] };
      open.set(`${table}\0${key}`, fresh);
      slots.push({ group: fresh });
    }
    seen.add(row);
  }
  return slots.map((s) => ('group' in s ? s.group.build(s.group.ids) : s.statement));
}

const alone = (p: Pending): Statement => ('statement' in p.write ? p.write.statement : p.write.row.build([p.write.row.id]));

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

  const enqueue = (write: Pending['write']) =>
    new Promise<void>((resolve, reject) => {
      if (queue.length === 0) setImmediate(() => void flush());
      queue.push({ write, resolve, reject });
    });

  return {
    write: (statement) => enqueue({ statement }),
    writeRow: (row) => enqueue({ row }),
  };
}
