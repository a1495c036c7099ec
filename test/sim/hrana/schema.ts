// zod schemas of the request bodies, so a malformed body is refused before any stream is touched.
// Unknown fields are stripped (the spec asks peers to ignore them); unknown request types are not.
import { z } from 'zod';
import type { Batch, BatchCond, CursorReqBody, PipelineReqBody, Stmt, StreamRequest, Value } from './proto.ts';

const int32 = z.number().int().min(-(2 ** 31)).max(2 ** 31 - 1);
const uint32 = z.number().int().min(0).max(2 ** 32 - 1);

const value: z.ZodType<Value> = z.discriminatedUnion('type', [
  z.object({ type: z.literal('null') }),
  z.object({ type: z.literal('integer'), value: z.string() }),
  z.object({ type: z.literal('float'), value: z.number() }),
  z.object({ type: z.literal('text'), value: z.string() }),
  z.object({ type: z.literal('blob'), base64: z.base64() }),
]);

const stmt: z.ZodType<Stmt> = z.object({
  sql: z.string().nullish(),
  sql_id: int32.nullish(),
  args: z.array(value).optional(),
  named_args: z.array(z.object({ name: z.string(), value })).optional(),
  want_rows: z.boolean().optional(),
});

const batchCond: z.ZodType<BatchCond> = z.lazy(() =>
  z.discriminatedUnion('type', [
    z.object({ type: z.literal('ok'), step: uint32 }),
    z.object({ type: z.literal('error'), step: uint32 }),
    z.object({ type: z.literal('not'), cond: batchCond }),
    z.object({ type: z.literal('and'), conds: z.array(batchCond) }),
    z.object({ type: z.literal('or'), conds: z.array(batchCond) }),
    z.object({ type: z.literal('is_autocommit') }),
  ]),
);

const batch: z.ZodType<Batch> = z.object({
  steps: z.array(z.object({ condition: batchCond.nullish(), stmt })),
});

const sqlRef = { sql: z.string().nullish(), sql_id: int32.nullish() };

const streamRequest: z.ZodType<StreamRequest> = z.discriminatedUnion('type', [
  z.object({ type: z.literal('close') }),
  z.object({ type: z.literal('execute'), stmt }),
  z.object({ type: z.literal('batch'), batch }),
  z.object({ type: z.literal('sequence'), ...sqlRef }),
  z.object({ type: z.literal('describe'), ...sqlRef }),
  z.object({ type: z.literal('store_sql'), sql_id: int32, sql: z.string() }),
  z.object({ type: z.literal('close_sql'), sql_id: int32 }),
  z.object({ type: z.literal('get_autocommit') }),
]);

export const pipelineReqBody: z.ZodType<PipelineReqBody> = z.object({
  baton: z.string().nullish().transform((b) => b ?? null),
  requests: z.array(streamRequest),
});

export const cursorReqBody: z.ZodType<CursorReqBody> = z.object({
  baton: z.string().nullish().transform((b) => b ?? null),
  batch,
});
