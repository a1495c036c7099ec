// The Protobuf encoding of Hrana 3 over HTTP (`/v3-protobuf/pipeline`), translated to and from the
// JSON shapes the rest of the simulator works with (pipeline and cursor endpoints). The schema is the "Hrana over HTTP" and "Shared
// structures" part of the spec's Protobuf appendix (only field names and numbers matter on the wire).
import protobuf from 'protobufjs';
import { HranaFault, type Batch, type BatchCond, type CursorEntry, type CursorReqBody, type HranaError, type BatchResult, type DescribeResult, type PipelineReqBody, type PipelineRespBody, type Stmt, type StmtResult, type StreamRequest, type StreamResponse, type Value } from './proto.ts';

const SCHEMA = `
syntax = "proto3";
package hrana;
message PipelineReqBody { optional string baton = 1; repeated StreamRequest requests = 2; }
message PipelineRespBody { optional string baton = 1; optional string base_url = 2; repeated StreamResult results = 3; }
message StreamResult { oneof result { StreamResponse ok = 1; Error error = 2; } }
message StreamRequest {
  oneof request {
    Empty close = 1; ExecuteStreamReq execute = 2; BatchStreamReq batch = 3; SqlRef sequence = 4;
    SqlRef describe = 5; StoreSqlStreamReq store_sql = 6; CloseSqlStreamReq close_sql = 7; Empty get_autocommit = 8;
  }
}
message StreamResponse {
  oneof response {
    Empty close = 1; ExecuteStreamResp execute = 2; BatchStreamResp batch = 3; Empty sequence = 4;
    DescribeStreamResp describe = 5; Empty store_sql = 6; Empty close_sql = 7; GetAutocommitStreamResp get_autocommit = 8;
  }
}
message Empty {}
message ExecuteStreamReq { Stmt stmt = 1; }
message ExecuteStreamResp { StmtResult result = 1; }
message BatchStreamReq { Batch batch = 1; }
message BatchStreamResp { BatchResult result = 1; }
message SqlRef { optional string sql = 1; optional int32 sql_id = 2; }
message DescribeStreamResp { DescribeResult result = 1; }
message StoreSqlStreamReq { int32 sql_id = 1; string sql = 2; }
message CloseSqlStreamReq { int32 sql_id = 1; }
message GetAutocommitStreamResp { bool is_autocommit = 1; }
message Error { string message = 1; optional string code = 2; }
message Stmt { optional string sql = 1; optional int32 sql_id = 2; repeated Value args = 3; repeated NamedArg named_args = 4; optional bool want_rows = 5; }
message NamedArg { string name = 1; Value value = 2; }
message StmtResult { repeated Col cols = 1; repeated Row rows = 2; uint64 affected_row_count = 3; optional sint64 last_insert_rowid = 4; }
message Col { optional string name = 1; optional string decltype = 2; }
message Row { repeated Value values = 1; }
message Batch { repeated BatchStep steps = 1; }
message BatchStep { optional BatchCond condition = 1; Stmt stmt = 2; }
message BatchCond {
  oneof cond { uint32 step_ok = 1; uint32 step_error = 2; BatchCond not = 3; CondList and = 4; CondList or = 5; Empty is_autocommit = 6; }
  message CondList { repeated BatchCond conds = 1; }
}
message BatchResult { map<uint32, StmtResult> step_results = 1; map<uint32, Error> step_errors = 2; }
message DescribeResult { repeated DescribeParam params = 1; repeated DescribeCol cols = 2; bool is_explain = 3; bool is_readonly = 4; }
message DescribeParam { optional string name = 1; }
message DescribeCol { string name = 1; optional string decltype = 2; }
message CursorReqBody { optional string baton = 1; Batch batch = 2; }
message CursorRespBody { optional string baton = 1; optional string base_url = 2; }
message CursorEntry { oneof entry { StepBeginEntry step_begin = 1; StepEndEntry step_end = 2; StepErrorEntry step_error = 3; Row row = 4; Error error = 5; } }
message StepBeginEntry { uint32 step = 1; repeated Col cols = 2; }
message StepEndEntry { uint64 affected_row_count = 1; optional sint64 last_insert_rowid = 2; }
message StepErrorEntry { uint32 step = 1; Error error = 2; }
message Value { oneof value { Empty null = 1; sint64 integer = 2; double float = 3; string text = 4; bytes blob = 5; } }
`;

const root = protobuf.parse(SCHEMA, { keepCase: true }).root;
const reqBodyType = root.lookupType('hrana.PipelineReqBody');
const respBodyType = root.lookupType('hrana.PipelineRespBody');
const cursorReqType = root.lookupType('hrana.CursorReqBody');
const cursorRespType = root.lookupType('hrana.CursorRespBody');
const cursorEntryType = root.lookupType('hrana.CursorEntry');

// Decoded messages as protobufjs's toObject leaves them: 64-bit integers as decimal strings,
// bytes as Buffers, and each oneof's chosen field named under the oneof's own name.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- walked field by field against the schema above
type Decoded = any;

function valueFrom(v: Decoded): Value {
  switch (v.value) {
    case 'integer':
      return { type: 'integer', value: String(v.integer) };
    case 'float':
      return { type: 'float', value: Number(v.float) };
    case 'text':
      return { type: 'text', value: String(v.text) };
    case 'blob':
      return { type: 'blob', base64: Buffer.from(v.blob as Uint8Array).toString('base64') };
    default:
      return { type: 'null' };
  }
}

function stmtFrom(s: Decoded | undefined): Stmt {
  if (!s) throw new HranaFault('a statement is missing', 'PROTO_ERROR');
  return {
    sql: s.sql ?? null,
    sql_id: s.sql_id ?? null,
    args: ((s.args ?? []) as Decoded[]).map(valueFrom),
    named_args: ((s.named_args ?? []) as Decoded[]).map((a) => ({ name: String(a.name), value: valueFrom(a.value ?? {}) })),
    want_rows: s.want_rows ?? true,
  };
}

function condFrom(c: Decoded): BatchCond {
  switch (c.cond) {
    case 'step_ok':
      return { type: 'ok', step: c.step_ok };
    case 'step_error':
      return { type: 'error', step: c.step_error };
    case 'not':
      return { type: 'not', cond: condFrom(c.not) };
    case 'and':
      return { type: 'and', conds: ((c.and?.conds ?? []) as Decoded[]).map(condFrom) };
    case 'or':
      return { type: 'or', conds: ((c.or?.conds ?? []) as Decoded[]).map(condFrom) };
    case 'is_autocommit':
      return { type: 'is_autocommit' };
    default:
      throw new HranaFault('a batch condition has no known variant', 'PROTO_ERROR');
  }
}

function batchFrom(b: Decoded | undefined): Batch {
  return { steps: ((b?.steps ?? []) as Decoded[]).map((s) => ({ condition: s.condition ? condFrom(s.condition) : null, stmt: stmtFrom(s.stmt) })) };
}

function requestFrom(r: Decoded): StreamRequest {
  switch (r.request) {
    case 'close':
      return { type: 'close' };
    case 'execute':
      return { type: 'execute', stmt: stmtFrom(r.execute.stmt) };
    case 'batch':
      return { type: 'batch', batch: batchFrom(r.batch.batch) };
    case 'sequence':
    case 'describe':
      return { type: r.request, sql: r[r.request].sql ?? null, sql_id: r[r.request].sql_id ?? null };
    case 'store_sql':
      return { type: 'store_sql', sql_id: r.store_sql.sql_id ?? 0, sql: r.store_sql.sql ?? '' };
    case 'close_sql':
      return { type: 'close_sql', sql_id: r.close_sql.sql_id ?? 0 };
    case 'get_autocommit':
      return { type: 'get_autocommit' };
    default:
      throw new HranaFault('a stream request has no known variant', 'PROTO_ERROR');
  }
}

function decode(type: protobuf.Type, body: Uint8Array): Decoded {
  try {
    return type.toObject(type.decode(body), { longs: String, oneofs: true });
  } catch (err) {
    throw new HranaFault(`request body is not a valid ${type.name}: ${(err as Error).message}`, 'PROTO_ERROR');
  }
}

export function decodePipelineRequest(body: Uint8Array): PipelineReqBody {
  const decoded = decode(reqBodyType, body);
  return { baton: decoded.baton ?? null, requests: ((decoded.requests ?? []) as Decoded[]).map(requestFrom) };
}

export function decodeCursorRequest(body: Uint8Array): CursorReqBody {
  const decoded = decode(cursorReqType, body);
  return { baton: decoded.baton ?? null, batch: batchFrom(decoded.batch) };
}

function valueTo(v: Value): Record<string, unknown> {
  switch (v.type) {
    case 'null':
      return { null: {} };
    case 'integer':
      return { integer: v.value };
    case 'float':
      return { float: v.value };
    case 'text':
      return { text: v.value };
    case 'blob':
      return { blob: Buffer.from(v.base64, 'base64') };
  }
}

function stmtResultTo(r: StmtResult): Record<string, unknown> {
  return {
    cols: r.cols.map((c) => ({ name: c.name ?? undefined, decltype: c.decltype ?? undefined })),
    rows: r.rows.map((row) => ({ values: row.map(valueTo) })),
    affected_row_count: r.affected_row_count,
    last_insert_rowid: r.last_insert_rowid ?? undefined,
  };
}

function errorTo(e: HranaError): Record<string, unknown> {
  return { message: e.message, code: e.code ?? undefined };
}

function entryTo(e: CursorEntry): Record<string, unknown> {
  switch (e.type) {
    case 'step_begin':
      return { step_begin: { step: e.step, cols: e.cols.map((c) => ({ name: c.name ?? undefined, decltype: c.decltype ?? undefined })) } };
    case 'step_end':
      return { step_end: { affected_row_count: e.affected_row_count, last_insert_rowid: e.last_insert_rowid ?? undefined } };
    case 'step_error':
      return { step_error: { step: e.step, error: errorTo(e.error) } };
    case 'row':
      return { row: { values: e.row.map(valueTo) } };
    case 'error':
      return { error: errorTo(e.error) };
  }
}

/** The cursor response: length-delimited CursorRespBody, then one length-delimited CursorEntry each. */
export function encodeCursorResponse(baton: string | null, entries: CursorEntry[]): Uint8Array {
  const parts = [cursorRespType.encodeDelimited(cursorRespType.fromObject({ baton: baton ?? undefined })).finish()];
  for (const entry of entries) parts.push(cursorEntryType.encodeDelimited(cursorEntryType.fromObject(entryTo(entry))).finish());
  return Buffer.concat(parts);
}

function batchResultTo(r: BatchResult): Record<string, unknown> {
  const stepResults: Record<number, unknown> = {};
  const stepErrors: Record<number, unknown> = {};
  r.step_results.forEach((res, i) => {
    if (res) stepResults[i] = stmtResultTo(res);
  });
  r.step_errors.forEach((err, i) => {
    if (err) stepErrors[i] = errorTo(err);
  });
  return { step_results: stepResults, step_errors: stepErrors };
}

function describeTo(r: DescribeResult): Record<string, unknown> {
  return {
    params: r.params.map((p) => ({ name: p.name ?? undefined })),
    cols: r.cols.map((c) => ({ name: c.name, decltype: c.decltype ?? undefined })),
    is_explain: r.is_explain,
    is_readonly: r.is_readonly,
  };
}

function responseTo(r: StreamResponse): Record<string, unknown> {
  switch (r.type) {
    case 'execute':
      return { execute: { result: stmtResultTo(r.result) } };
    case 'batch':
      return { batch: { result: batchResultTo(r.result) } };
    case 'describe':
      return { describe: { result: describeTo(r.result) } };
    case 'get_autocommit':
      return { get_autocommit: { is_autocommit: r.is_autocommit } };
    default:
      return { [r.type]: {} };
  }
}

export function encodePipelineResponse(body: PipelineRespBody): Uint8Array {
  const message = respBodyType.fromObject({
    baton: body.baton ?? undefined,
    base_url: body.base_url ?? undefined,
    results: body.results.map((res) =>
      res.type === 'ok' ? { ok: responseTo(res.response) } : { error: errorTo(res.error) },
    ),
  });
  return respBodyType.encode(message).finish();
}
