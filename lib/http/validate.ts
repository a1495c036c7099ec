import type { Context } from 'hono';
import type { z } from 'zod';
import { ApiError, badRequest } from './errors.ts';
import { MAX_NESTING, textNesting } from '../nesting.ts';

/** Names the first problem with its field path, e.g. `endpoint: must be https://host:port`. */
export function describeZodError(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'invalid input';
  if (issue.code === 'unrecognized_keys') {
    const where = issue.path.length ? `${issue.path.join('.')}: ` : '';
    return `${where}unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  }
  const path = issue.path.join('.');
  return path ? `${path}: ${issue.message}` : issue.message;
}

export function parseWith<S extends z.ZodType>(schema: S, value: unknown, code = 'invalid_request'): z.output<S> {
  const res = schema.safeParse(value);
  if (!res.success) {
    const issue = res.error.issues[0];
    throw new ApiError(400, code, describeZodError(res.error), issue ? { field: issue.path.join('.') } : undefined);
  }
  return res.data;
}

/** Reads and validates a JSON body. The body size limit is enforced by middleware before this. */
export async function readJson<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const type = c.req.header('content-type') ?? '';
  if (!/^application\/(.+\+)?json\b/i.test(type)) {
    throw new ApiError(415, 'unsupported_media_type', 'request body must be application/json');
  }
  const text = await c.req.text();
  if (textNesting(text) > MAX_NESTING) throw badRequest(`request body nests deeper than ${MAX_NESTING} levels`);
  let value: unknown;
  try {
    value = text.length === 0 ? undefined : JSON.parse(text);
  } catch {
    throw badRequest('request body is not valid JSON');
  }
  if (value === undefined) throw badRequest('request body is empty');
  return parseWith(schema, value);
}

export function readQuery<S extends z.ZodType>(c: Context, schema: S): z.output<S> {
  return parseWith(schema, c.req.query());
}
