import { z } from 'zod';
import { operations, type Answer, type Operation } from './operations.ts';

const errorSchema = z.object({ error: z.object({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()).optional() }) });
const runSchema = z.object({
  id: z.string(),
  kind: z.string(),
  tenant: z.string().nullable(),
  cluster: z.string().nullable(),
  state: z.enum(['queued', 'running', 'succeeded', 'failed', 'canceled', 'interrupted']),
  params: z.record(z.string(), z.unknown()),
  result: z.unknown(),
  error: z.string().nullable(),
  cancelRequested: z.boolean(),
  attempt: z.number().int(),
  createdBy: z.string().nullable(),
  createdAt: z.number().int(),
  startedAt: z.number().int().nullable(),
  finishedAt: z.number().int().nullable(),
});

/** JSON Schema 2020-12 (what OpenAPI 3.1 speaks) of what a client sends: the schema's input side. */
const jsonSchema = (schema: z.ZodType) => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
};

const SECURITY: Record<Operation['auth'], Record<string, string[]>[]> = {
  bearer: [{ bearer: [] }],
  basic: [{ stateBasic: [] }],
  signature: [{ webhookSignature: [] }],
  none: [],
};

function success(answer: Answer): Record<string, unknown> {
  switch (answer) {
    case 'run':
      return { description: 'Queued: the run to follow', content: { 'application/json': { schema: { type: 'object', properties: { run: { $ref: '#/components/schemas/Run' } }, required: ['run'] } } } };
    case 'events':
      return { description: 'Events as JSON, or a Server-Sent Events stream', content: { 'application/json': { schema: { type: 'object' } }, 'text/event-stream': { schema: { type: 'string' } } } };
    case 'text':
      return { description: 'Text', content: { 'text/plain': { schema: { type: 'string' } } } };
    case 'yaml':
      return { description: 'YAML', content: { 'application/yaml': { schema: { type: 'string' } } } };
    case 'file':
      return { description: 'The file, as an attachment', content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } };
    case 'state':
      return { description: 'The tofu state (JSON)', content: { 'application/json': { schema: { type: 'object' } } } };
    case 'empty':
      return { description: 'Done' };
    case 'json':
      return { description: 'OK', content: { 'application/json': { schema: { type: 'object' } } } };
  }
}

function operationObject(o: Operation): Record<string, unknown> {
  const params = [...o.path.matchAll(/:([A-Za-z]+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
  if (o.query) {
    const q = jsonSchema(o.query) as { properties?: Record<string, unknown>; required?: string[] };
    for (const [name, schema] of Object.entries(q.properties ?? {})) params.push({ name, in: 'query', required: q.required?.includes(name) ?? false, schema } as never);
  }
  const status = String(o.status ?? (o.answer === 'run' ? 202 : 200));
  const error = { description: 'Refused; the body says why', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
  return {
    tags: [o.tag],
    summary: o.summary,
    operationId: `${o.method}${o.path.replace(/\/:?([A-Za-z0-9-]+)/g, (_m, p: string) => p.charAt(0).toUpperCase() + p.slice(1)).replace(/[^A-Za-z0-9]/g, '')}`,
    ...(o.scope ? { 'x-rezus-scope': o.scope } : {}),
    security: SECURITY[o.auth],
    ...(params.length ? { parameters: params } : {}),
    ...(o.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(o.body) } } } } : {}),
    responses: { [status]: success(o.answer), '4XX': error },
  };
}

/** The OpenAPI 3.1 description of the API, built from the schemas the handlers validate with. */
export function openApiDocument(version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const o of operations()) {
    const path = o.path.replace(/:([A-Za-z]+)/g, '{$1}');
    (paths[path] ??= {})[o.method] = operationObject(o);
  }
  return {
    openapi: '3.1.0',
    info: { title: 'RezusCloud API', version, description: 'Control plane for personal clouds built on Talos Linux.' },
    servers: [{ url: '/' }],
    paths,
    components: {
      schemas: { Error: jsonSchema(errorSchema), Run: jsonSchema(runSchema) },
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'The admin token or a tenant token' },
        stateBasic: { type: 'http', scheme: 'basic', description: 'A per-run state credential (username = run id), minted by the provision executor' },
        webhookSignature: { type: 'apiKey', in: 'header', name: 'X-Rezus-Signature', description: 'sha256=<hex HMAC-SHA256> with the tenant webhook secret' },
      },
    },
  };
}
