// A Hrana-over-HTTP server (tursodatabase/libsql docs/HRANA_3_SPEC.md, "Hrana over HTTP") backed by
// the embedded libsql engine: what `@libsql/client` with an http:// URL talks to, standing in for
// sqld/Turso in tests. Pipelines and cursors in JSON (`/v2`, `/v3`) and Protobuf (`/v3-protobuf`).
//
// Each stream owns one connection to the database file. A pipeline without a baton opens a stream;
// the response carries a fresh, random baton unless the stream was closed; a stream whose baton is
// not used for `streamIdleMs` is rolled back and closed, as the spec expects of a server.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import Database from 'libsql';
import { HranaFault, type CursorEntry, type CursorReqBody, type HranaError, type PipelineReqBody, type PipelineRespBody, type StreamRequest, type StreamResponse, type StreamResult } from './proto.ts';
import { decodeCursorRequest, decodePipelineRequest, encodeCursorResponse, encodePipelineResponse } from './protobuf.ts';
import { cursorReqBody, pipelineReqBody } from './schema.ts';
import { SqlStream, errorToProto } from './stream.ts';

export interface HranaSimOptions {
  /** Path of the database file (created if missing; WAL mode is switched on). */
  dbPath: string;
  /** When set, every pipeline/cursor request must carry `Authorization: Bearer <token>`. */
  authToken?: string;
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** A stream whose baton goes unused this long is rolled back and closed. Default 10 s. */
  streamIdleMs?: number;
  /** How long a statement waits for another stream's write lock. Default 5 s. */
  busyTimeoutMs?: number;
  /** Largest request body accepted, in bytes. Default 16 MiB. */
  maxBodyBytes?: number;
}

export interface HranaSimStats {
  /** Streams alive between pipeline requests (each holds a connection). */
  openStreams: number;
  /** Streams closed because their baton expired. */
  expiredStreams: number;
  /** Pipeline and cursor requests answered with 200. */
  requests: number;
  /** Requests refused for a missing or wrong token. */
  unauthorized: number;
}

export interface HranaSim {
  /** Base URL for `@libsql/client` (`http://host:port`). */
  url: string;
  port: number;
  stats(): HranaSimStats;
  close(): Promise<void>;
}

class HttpFault extends HranaFault {
  constructor(
    readonly status: number,
    message: string,
    code: string,
  ) {
    super(message, code);
  }
}

interface Held {
  stream: SqlStream;
  lastUsed: number;
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

export async function startHranaSim(opts: HranaSimOptions): Promise<HranaSim> {
  const streamIdleMs = opts.streamIdleMs ?? 10_000;
  const streamOpts = { busyTimeoutMs: opts.busyTimeoutMs ?? 5_000 };
  const maxBodyBytes = opts.maxBodyBytes ?? 16 * 1024 * 1024;
  const tokenDigest = opts.authToken === undefined ? undefined : digest(opts.authToken);
  const held = new Map<string, Held>();
  const counts = { expiredStreams: 0, requests: 0, unauthorized: 0 };

  // WAL is a property of the file: set it once so readers on one stream never wait for a writer on another.
  const setup = new Database(opts.dbPath);
  setup.exec('PRAGMA journal_mode = WAL');
  setup.close();

  function authorize(req: IncomingMessage): void {
    if (!tokenDigest) return;
    const match = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    // Compare digests so the comparison takes the same time whatever the length of the guess.
    if (!match?.[1] || !timingSafeEqual(digest(match[1].trim()), tokenDigest)) {
      counts.unauthorized++;
      throw new HttpFault(401, 'Authentication failed: a valid bearer token is required', 'UNAUTHORIZED');
    }
  }

  function issueBaton(stream: SqlStream): string {
    const baton = randomBytes(24).toString('base64url');
    held.set(baton, { stream, lastUsed: Date.now() });
    return baton;
  }

  // A baton is good for one request: taking it removes it, so a replayed or concurrent request
  // with the same baton is refused instead of interleaving on the stream.
  function takeStream(baton: string | null): SqlStream {
    if (baton === null) return new SqlStream(opts.dbPath, streamOpts);
    const entry = held.get(baton);
    if (!entry) throw new HttpFault(400, 'The stream has expired or its baton is not valid', 'STREAM_EXPIRED');
    held.delete(baton);
    return entry.stream;
  }

  const sweeper = setInterval(
    () => {
      const now = Date.now();
      for (const [baton, entry] of held) {
        if (now - entry.lastUsed < streamIdleMs) continue;
        held.delete(baton);
        entry.stream.close();
        counts.expiredStreams++;
      }
    },
    Math.max(20, Math.min(1_000, Math.floor(streamIdleMs / 4))),
  );
  sweeper.unref();

  async function handleRequest(stream: SqlStream, req: StreamRequest, version: 2 | 3): Promise<StreamResponse> {
    switch (req.type) {
      case 'close':
        return { type: 'close' };
      case 'execute':
        return { type: 'execute', result: await stream.execute(req.stmt) };
      case 'batch':
        return { type: 'batch', result: await stream.batch(req.batch, { version }) };
      case 'sequence':
        stream.sequence(stream.resolveSql(req.sql, req.sql_id));
        return { type: 'sequence' };
      case 'describe':
        return { type: 'describe', result: stream.describe(stream.resolveSql(req.sql, req.sql_id)) };
      case 'store_sql':
        stream.storeSql(req.sql_id, req.sql);
        return { type: 'store_sql' };
      case 'close_sql':
        stream.closeSql(req.sql_id);
        return { type: 'close_sql' };
      case 'get_autocommit':
        if (version < 3) throw new HranaFault('get_autocommit needs Hrana 3 (/v3/pipeline)', 'PROTOCOL_VERSION');
        return { type: 'get_autocommit', is_autocommit: stream.isAutocommit };
    }
  }

  function parseCursor(body: unknown): CursorReqBody {
    const parsed = cursorReqBody.safeParse(body);
    if (!parsed.success) throw new HttpFault(400, `invalid cursor request: ${parsed.error.message}`, 'PROTO_ERROR');
    return parsed.data;
  }

  function parsePipeline(body: unknown): PipelineReqBody {
    const parsed = pipelineReqBody.safeParse(body);
    if (!parsed.success) throw new HttpFault(400, `invalid pipeline request: ${parsed.error.message}`, 'PROTO_ERROR');
    return parsed.data;
  }

  async function pipeline(version: 2 | 3, body: PipelineReqBody): Promise<PipelineRespBody> {
    const stream = takeStream(body.baton);
    const results: StreamResult[] = [];
    let closed = false;
    for (const req of body.requests) {
      if (closed) {
        results.push({ type: 'error', error: { message: 'the stream is closed', code: 'STREAM_CLOSED' } });
        continue;
      }
      try {
        results.push({ type: 'ok', response: await handleRequest(stream, req, version) });
        if (req.type === 'close') closed = true;
      } catch (err) {
        results.push({ type: 'error', error: errorToProto(err) });
      }
    }
    if (closed) stream.close();
    return { baton: closed ? null : issueBaton(stream), base_url: null, results };
  }

  // The cursor endpoint answers with the whole batch at once instead of streaming rows as they are
  // produced; clients read it the same way.
  async function cursor(body: CursorReqBody): Promise<{ baton: string; entries: CursorEntry[] }> {
    const stream = takeStream(body.baton);
    const entries: CursorEntry[] = [];
    try {
      const result = await stream.batch(body.batch, { version: 3 });
      result.step_results.forEach((res, step) => {
        const error = result.step_errors[step];
        if (error) entries.push({ type: 'step_error', step, error });
        if (!res) return;
        entries.push({ type: 'step_begin', step, cols: res.cols });
        for (const row of res.rows) entries.push({ type: 'row', row });
        entries.push({ type: 'step_end', affected_row_count: res.affected_row_count, last_insert_rowid: res.last_insert_rowid });
      });
    } catch (err) {
      entries.push({ type: 'error', error: errorToProto(err) });
    }
    return { baton: issueBaton(stream), entries };
  }

  function decodeProtobuf<T>(decode: (body: Uint8Array) => T, body: Uint8Array): T {
    try {
      return decode(body);
    } catch (err) {
      if (err instanceof HranaFault && !(err instanceof HttpFault)) throw new HttpFault(400, err.message, err.code);
      throw err;
    }
  }

  async function readBody(req: IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBodyBytes) throw new HttpFault(413, `request body larger than ${maxBodyBytes} bytes`, 'BODY_TOO_LARGE');
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  }

  async function readJson(req: IncomingMessage): Promise<unknown> {
    const body = await readBody(req);
    try {
      return JSON.parse(body.toString('utf8'));
    } catch {
      throw new HttpFault(400, 'request body is not valid JSON', 'PROTO_ERROR');
    }
  }

  function send(res: ServerResponse, status: number, body: string | Uint8Array, type = 'application/json'): void {
    res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://sim').pathname.replace(/\/+$/, '') || '/';
    const method = req.method ?? 'GET';
    // Version probes carry no token (the client sends none), so they are public, as on sqld.
    if (method === 'GET' && ['/v2', '/v3', '/v3-protobuf', '/health'].includes(path)) return send(res, 200, '', 'text/plain');
    if (method === 'POST' && (path === '/v2/pipeline' || path === '/v3/pipeline')) {
      authorize(req);
      const body = await pipeline(path === '/v2/pipeline' ? 2 : 3, parsePipeline(await readJson(req)));
      counts.requests++;
      return send(res, 200, JSON.stringify(body));
    }
    if (method === 'POST' && path === '/v3-protobuf/pipeline') {
      authorize(req);
      const body = await pipeline(3, decodeProtobuf(decodePipelineRequest, await readBody(req)));
      counts.requests++;
      return send(res, 200, encodePipelineResponse(body), 'application/x-protobuf');
    }
    if (method === 'POST' && (path === '/v3/cursor' || path === '/v3-protobuf/cursor')) {
      authorize(req);
      const json = path === '/v3/cursor';
      const request = json ? parseCursor(await readJson(req)) : decodeProtobuf(decodeCursorRequest, await readBody(req));
      const { baton, entries } = await cursor(request);
      counts.requests++;
      if (!json) return send(res, 200, encodeCursorResponse(baton, entries), 'application/x-protobuf');
      const lines = [{ baton, base_url: null }, ...entries].map((e) => JSON.stringify(e));
      return send(res, 200, lines.join('\n') + '\n', 'text/plain');
    }
    throw new HttpFault(404, `${method} ${path} is not served (Hrana 2 and 3 over HTTP)`, 'NOT_FOUND');
  }

  const server = http.createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      const status = err instanceof HttpFault ? err.status : 500;
      const error: HranaError = errorToProto(err);
      if (!res.headersSent) send(res, status, JSON.stringify(error));
      else res.destroy();
    });
  });
  // Keep-alive connections from a client would otherwise hold close() open.
  server.keepAliveTimeout = 1_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const host = opts.host ?? '127.0.0.1';

  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    stats: () => ({ openStreams: held.size, ...counts }),
    async close() {
      clearInterval(sweeper);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      for (const entry of held.values()) entry.stream.close();
      held.clear();
    },
  };
}
