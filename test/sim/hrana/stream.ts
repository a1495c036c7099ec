// One Hrana stream: a dedicated connection to the embedded database plus the SQL texts stored on
// it. Interactive transactions live on this connection, so the server keeps the stream (and
// therefore the connection) for as long as its baton is alive.
import Database from 'libsql';
import {
  HranaFault,
  type Batch,
  type BatchCond,
  type BatchResult,
  type DescribeResult,
  type HranaError,
  type Stmt,
  type StmtResult,
} from './proto.ts';
import { valueFromSql, valueToSql, type SqlValue } from './values.ts';

type Connection = InstanceType<typeof Database>;
type Prepared = ReturnType<Connection['prepare']>;

export interface StreamOptions {
  /** How long a statement waits for another connection's write lock before failing with SQLITE_BUSY. */
  busyTimeoutMs: number;
}

interface EngineError {
  code: string;
  rawCode?: number;
  message: string;
}

function isEngineError(err: unknown): err is EngineError {
  return err instanceof Error && typeof (err as { code?: unknown }).code === 'string';
}

/** The `Error` structure for a failure: an engine error keeps SQLite's code (e.g. SQLITE_CONSTRAINT_UNIQUE). */
export function errorToProto(err: unknown): HranaError {
  if (err instanceof HranaFault) return err.toProto();
  if (isEngineError(err)) return { message: err.message, code: err.code };
  return { message: err instanceof Error ? err.message : String(err), code: 'INTERNAL' };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// The engine's calls are synchronous, so SQLite's own busy handler would block the event loop and
// with it the very request (a COMMIT on another stream) that releases the lock. Waiting here, between
// attempts, lets that request run. Only a plain SQLITE_BUSY is retried: an extended code such as
// BUSY_SNAPSHOT means the transaction's snapshot is stale, and "statements in progress" cannot
// clear by waiting.
async function retryWhileBusy<T>(attempt: () => T, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 1; ; delay = Math.min(delay * 2, 20)) {
    try {
      return attempt();
    } catch (err) {
      const busy =
        isEngineError(err) &&
        err.code === 'SQLITE_BUSY' &&
        (err.rawCode === undefined || err.rawCode === 5) &&
        !err.message.includes('statements in progress');
      if (!busy || Date.now() >= deadline) throw err;
      await sleep(delay);
    }
  }
}

type StepOutcome = 'ok' | 'error' | 'skipped';

export class SqlStream {
  private readonly conn: Connection;
  private readonly sqlTexts = new Map<number, string>();
  private readonly counters;
  private open = true;

  constructor(
    path: string,
    private readonly opts: StreamOptions,
  ) {
    // Foreign keys are enforced without a PRAGMA: libsql (the engine here and sqld's) is built with
    // SQLITE_DEFAULT_FOREIGN_KEYS=1.
    this.conn = new Database(path);
    this.counters = this.conn.prepare('SELECT changes(), last_insert_rowid(), total_changes()');
    this.counters.safeIntegers(true);
    this.counters.raw(true);
  }

  get isAutocommit(): boolean {
    return !this.conn.inTransaction;
  }

  storeSql(sqlId: number, sql: string): void {
    if (this.sqlTexts.has(sqlId)) throw new HranaFault(`SQL text id ${sqlId} is already in use on this stream`, 'SQL_ID_IN_USE');
    this.sqlTexts.set(sqlId, sql);
  }

  closeSql(sqlId: number): void {
    this.sqlTexts.delete(sqlId);
  }

  /** The SQL text of a request that names it by `sql` or by `sql_id` (exactly one). */
  resolveSql(sql: string | null | undefined, sqlId: number | null | undefined): string {
    const hasSql = sql !== null && sql !== undefined;
    const hasId = sqlId !== null && sqlId !== undefined;
    if (hasSql === hasId) throw new HranaFault('exactly one of "sql" and "sql_id" must be given', 'SQL_TEXT_INVALID');
    if (hasSql) return sql;
    const stored = this.sqlTexts.get(sqlId as number);
    if (stored === undefined) throw new HranaFault(`SQL text id ${sqlId} is not stored on this stream`, 'SQL_NOT_FOUND');
    return stored;
  }

  async execute(stmt: Stmt): Promise<StmtResult> {
    const sql = this.resolveSql(stmt.sql, stmt.sql_id);
    const args = this.bindArgs(sql, stmt);
    const prepared = this.conn.prepare(sql);
    prepared.safeIntegers(true);
    let returnsData = true;
    try {
      prepared.raw(true);
    } catch {
      // raw() refuses statements that produce no columns (INSERT without RETURNING, DDL, ...).
      returnsData = false;
    }
    // A statement that failed with SQLITE_BUSY stays active in the engine (SQLite expects it to be
    // stepped again) and would block this connection's COMMIT until it is garbage-collected, so the
    // retry steps the same prepared statement rather than a fresh one.
    return retryWhileBusy(() => this.run(prepared, returnsData, args, stmt.want_rows ?? true), this.opts.busyTimeoutMs);
  }

  private counterValues(): { changes: bigint; lastRowid: bigint; total: bigint } {
    const row = this.counters.all([])[0] as [bigint, bigint, bigint];
    return { changes: row[0], lastRowid: row[1], total: row[2] };
  }

  private run(prepared: Prepared, returnsData: boolean, args: SqlValue[], wantRows: boolean): StmtResult {
    const started = performance.now();
    const before = this.counterValues().total;
    let rows: unknown[][] = [];
    let cols: StmtResult['cols'] = [];
    if (returnsData) {
      rows = prepared.all(args) as unknown[][];
      cols = prepared.columns().map((c) => ({ name: c.name, decltype: c.type ?? null }));
    } else {
      prepared.run(args);
    }
    // sqlite3_changes() keeps the count of the last DML statement, so it is only meaningful when
    // this statement itself changed rows (total_changes moved).
    const after = this.counterValues();
    const wrote = after.total !== before;
    return {
      cols,
      rows: wantRows ? rows.map((row) => row.map(valueFromSql)) : [],
      affected_row_count: wrote ? Number(after.changes) : 0,
      last_insert_rowid: wrote ? after.lastRowid.toString() : null,
      rows_read: 0,
      rows_written: 0,
      query_duration_ms: performance.now() - started,
    };
  }

  // Arguments are always bound as one positional array: named ones are placed at the index SQLite
  // gave their parameter. (Binding an object through the engine aborts the process when the
  // statement also has a nameless `?`.)
  private bindArgs(sql: string, stmt: Stmt): SqlValue[] {
    const values = (stmt.args ?? []).map(valueToSql);
    const named = stmt.named_args ?? [];
    if (named.length === 0) return values;
    const indexByName = new Map<string, number>();
    for (const [index, name] of this.parameters(sql)) if (name) indexByName.set(name, index);
    for (const arg of named) {
      const candidates = /^[:@$?]/.test(arg.name) ? [arg.name] : [`:${arg.name}`, `@${arg.name}`, `$${arg.name}`];
      const index = candidates.map((n) => indexByName.get(n)).find((i) => i !== undefined);
      if (index === undefined) throw new HranaFault(`the statement has no parameter named ${JSON.stringify(arg.name)}`, 'ARGS_INVALID');
      while (values.length < index) values.push(null);
      values[index - 1] = valueToSql(arg.value);
    }
    return values;
  }

  /** Parameter index → name (null for `?`), read from the compiled program's Variable opcodes. */
  private parameters(sql: string): Map<number, string | null> {
    const params = new Map<number, string | null>();
    for (const op of this.program(sql)) {
      if (op[1] === 'Variable') params.set(Number(op[2]), (op[5] as string | null) ?? null);
    }
    return params;
  }

  private program(sql: string): unknown[][] {
    const explain = this.conn.prepare(`EXPLAIN ${sql}`);
    explain.raw(true);
    return explain.all([]) as unknown[][];
  }

  async batch(batch: Batch, opts: { version: 2 | 3 }): Promise<BatchResult> {
    batch.steps.forEach((step, i) => {
      if (step.condition) checkCondition(step.condition, i, opts.version);
    });
    const outcomes: StepOutcome[] = [];
    const result: BatchResult = { step_results: [], step_errors: [] };
    for (const step of batch.steps) {
      if (step.condition && !this.evaluate(step.condition, outcomes)) {
        outcomes.push('skipped');
        result.step_results.push(null);
        result.step_errors.push(null);
        continue;
      }
      try {
        result.step_results.push(await this.execute(step.stmt));
        result.step_errors.push(null);
        outcomes.push('ok');
      } catch (err) {
        result.step_results.push(null);
        result.step_errors.push(errorToProto(err));
        outcomes.push('error');
      }
    }
    return result;
  }

  private evaluate(cond: BatchCond, outcomes: StepOutcome[]): boolean {
    switch (cond.type) {
      case 'ok':
        return outcomes[cond.step] === 'ok';
      case 'error':
        return outcomes[cond.step] === 'error';
      case 'not':
        return !this.evaluate(cond.cond, outcomes);
      case 'and':
        return cond.conds.every((c) => this.evaluate(c, outcomes));
      case 'or':
        return cond.conds.some((c) => this.evaluate(c, outcomes));
      case 'is_autocommit':
        return this.isAutocommit;
    }
  }

  /**
   * Runs every statement of `sql` in order, ignoring rows. Not retried on SQLITE_BUSY: the engine
   * runs the text in one call, and statements before the busy one may already have taken effect.
   */
  sequence(sql: string): void {
    this.conn.exec(sql);
  }

  describe(sql: string): DescribeResult {
    const isExplain = /^\s*explain\b/i.test(sql);
    const prepared = this.conn.prepare(sql);
    let cols: DescribeResult['cols'] = [];
    try {
      prepared.raw(true);
      cols = prepared.columns().map((c) => ({ name: c.name, decltype: c.type ?? null }));
    } catch {
      // no result columns
    }
    if (isExplain) return { params: [], cols, is_explain: true, is_readonly: true };
    const program = this.program(sql);
    const names = this.parameters(sql);
    const count = Math.max(0, ...names.keys());
    const params = Array.from({ length: count }, (_, i) => ({ name: names.get(i + 1) ?? null }));
    // Like sqlite3_stmt_readonly: transaction control counts as read-only; otherwise a statement
    // writes when its program opens a write transaction (Transaction with P2 != 0).
    const transactionControl = program.some((op) => op[1] === 'AutoCommit' || op[1] === 'Savepoint');
    const writes = program.some((op) => op[1] === 'Transaction' && Number(op[3]) !== 0);
    return { params, cols, is_explain: false, is_readonly: transactionControl || !writes };
  }

  /** Rolls back what the client left open and releases the connection. */
  close(): void {
    if (!this.open) return;
    this.open = false;
    try {
      if (this.conn.inTransaction) this.conn.exec('ROLLBACK');
    } finally {
      this.conn.close();
    }
  }
}

function checkCondition(cond: BatchCond, stepIndex: number, version: 2 | 3): void {
  switch (cond.type) {
    case 'ok':
    case 'error':
      if (cond.step >= stepIndex) {
        throw new HranaFault(`step ${stepIndex}: condition refers to step ${cond.step}, which does not run before it`, 'BATCH_COND_INVALID');
      }
      return;
    case 'not':
      return checkCondition(cond.cond, stepIndex, version);
    case 'and':
    case 'or':
      return cond.conds.forEach((c) => checkCondition(c, stepIndex, version));
    case 'is_autocommit':
      if (version < 3) throw new HranaFault('the "is_autocommit" condition needs Hrana 3 (/v3/pipeline)', 'BATCH_COND_INVALID');
  }
}
