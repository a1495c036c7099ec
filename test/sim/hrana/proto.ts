// The JSON shapes of Hrana over HTTP (versions 2 and 3), as written in tursodatabase/libsql
// docs/HRANA_3_SPEC.md. Only the HTTP variant is modelled: WebSocket messages and Protobuf are not
// served by the simulator.

export type Value =
  | { type: 'null' }
  | { type: 'integer'; value: string }
  | { type: 'float'; value: number }
  | { type: 'text'; value: string }
  | { type: 'blob'; base64: string };

export interface HranaError {
  message: string;
  code?: string | null;
}

export interface NamedArg {
  name: string;
  value: Value;
}

export interface Stmt {
  sql?: string | null;
  sql_id?: number | null;
  args?: Value[];
  named_args?: NamedArg[];
  want_rows?: boolean;
}

export interface Col {
  name: string | null;
  decltype: string | null;
}

export interface StmtResult {
  cols: Col[];
  rows: Value[][];
  affected_row_count: number;
  last_insert_rowid: string | null;
  rows_read: number;
  rows_written: number;
  query_duration_ms: number;
}

export type BatchCond =
  | { type: 'ok'; step: number }
  | { type: 'error'; step: number }
  | { type: 'not'; cond: BatchCond }
  | { type: 'and'; conds: BatchCond[] }
  | { type: 'or'; conds: BatchCond[] }
  | { type: 'is_autocommit' };

export interface BatchStep {
  condition?: BatchCond | null;
  stmt: Stmt;
}

export interface Batch {
  steps: BatchStep[];
}

export interface BatchResult {
  step_results: Array<StmtResult | null>;
  step_errors: Array<HranaError | null>;
}

export interface DescribeResult {
  params: Array<{ name: string | null }>;
  cols: Array<{ name: string; decltype: string | null }>;
  is_explain: boolean;
  is_readonly: boolean;
}

export type StreamRequest =
  | { type: 'close' }
  | { type: 'execute'; stmt: Stmt }
  | { type: 'batch'; batch: Batch }
  | { type: 'sequence'; sql?: string | null; sql_id?: number | null }
  | { type: 'describe'; sql?: string | null; sql_id?: number | null }
  | { type: 'store_sql'; sql_id: number; sql: string }
  | { type: 'close_sql'; sql_id: number }
  | { type: 'get_autocommit' };

export type StreamResponse =
  | { type: 'close' }
  | { type: 'execute'; result: StmtResult }
  | { type: 'batch'; result: BatchResult }
  | { type: 'sequence' }
  | { type: 'describe'; result: DescribeResult }
  | { type: 'store_sql' }
  | { type: 'close_sql' }
  | { type: 'get_autocommit'; is_autocommit: boolean };

export type StreamResult = { type: 'ok'; response: StreamResponse } | { type: 'error'; error: HranaError };

export interface PipelineReqBody {
  baton: string | null;
  requests: StreamRequest[];
}

export interface PipelineRespBody {
  baton: string | null;
  base_url: string | null;
  results: StreamResult[];
}

export interface CursorReqBody {
  baton: string | null;
  batch: Batch;
}

export type CursorEntry =
  | { type: 'step_begin'; step: number; cols: Col[] }
  | { type: 'step_end'; affected_row_count: number; last_insert_rowid: string | null }
  | { type: 'step_error'; step: number; error: HranaError }
  | { type: 'row'; row: Value[] }
  | { type: 'error'; error: HranaError };

/** A failure that the protocol reports as an `Error` structure (in a result, or as an HTTP body). */
export class HranaFault extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }

  toProto(): HranaError {
    return { message: this.message, code: this.code };
  }
}
