import type { BatchItem } from 'drizzle-orm/batch';
import type { Db } from '../db/client.ts';

type Statement = BatchItem<'sqlite'>;

interface Pending {
  statement: Statement;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface CommitBatcher {
  /** Resolves once the statement is committed, together with the others of this event-loop turn. */
  write(statement: Statement): Promise<void>;
}

/**
 * Group commit for writes made by many concurrent tasks of one run (a cluster push's nodes): each
 * commit syncs the database file and blocks the process while it does, so statements queued in
 * the same turn of the event loop go out in one transaction. If that transaction fails, each
 * statement is retried alone, so one bad write fails only its own caller.
 */
export function createCommitBatcher(db: Db): CommitBatcher {
  let queue: Pending[] = [];

  async function flush(): Promise<void> {
    const batch = queue;
    queue = [];
    try {
      await db.batch(batch.map((p) => p.statement) as [Statement, ...Statement[]]);
      for (const p of batch) p.resolve();
    } catch {
      for (const p of batch) {
        try {
          await p.statement;
          p.resolve();
        } catch (err) {
          p.reject(err);
        }
      }
    }
  }

  return {
    write(statement) {
      return new Promise<void>((resolve, reject) => {
        if (queue.length === 0) setImmediate(() => void flush());
        queue.push({ statement, resolve, reject });
      });
    },
  };
}
