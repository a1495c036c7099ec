// The Hrana-over-HTTP simulator against the unmodified libsql clients (Node `@libsql/client` with an
// http:// URL and `@libsql/client/web`), and the project's own database layer and run queue on top.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { createClient, LibsqlBatchError, LibsqlError, type Client } from '@libsql/client';
import { createClient as createWebClient } from '@libsql/client/web';
import * as hrana from '@libsql/hrana-client';
import { openDatabase, runMigrations, type Database } from '../db/client.ts';
import { migrationStatus } from '../db/status.ts';
import { createRunBus } from '../lib/jobs/bus.ts';
import { ActiveRunConflict, createJobs } from '../lib/jobs/queue.ts';
import { startHranaSim, type HranaSim } from './sim/hrana/server.ts';

const TOKEN = 'sim-token-4f1d2a';

let dir: string;
let sim: HranaSim;
const clients: Array<{ close(): void }> = [];

function client(opts: { token?: string; intMode?: 'number' | 'bigint' } = {}): Client {
  const c = createClient({ url: sim.url, authToken: opts.token ?? TOKEN, intMode: opts.intMode });
  clients.push(c);
  return c;
}

async function until(what: string, check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- protocol bodies are checked field by field below
async function pipeline(version: 2 | 3, body: unknown, token: string | null = TOKEN): Promise<{ status: number; body: any }> {
  const res = await fetch(`${sim.url}/v${version}/pipeline`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hrana-sim-'));
  sim = await startHranaSim({ dbPath: join(dir, 'sim.db'), authToken: TOKEN });
});

afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

afterAll(async () => {
  await sim.close();
  await rm(dir, { recursive: true, force: true });
});

describe('@libsql/client over http against the Hrana sim', () => {
  it('executes statements with positional and named arguments and keeps every value type', async () => {
    const c = client({ intMode: 'bigint' });
    await c.execute('CREATE TABLE vals (id INTEGER PRIMARY KEY, i INTEGER, f REAL, t TEXT, b BLOB, n TEXT)');
    const big = 9_007_199_254_740_993n; // 2^53 + 1: survives only if integers travel as strings
    const ins = await c.execute({
      sql: 'INSERT INTO vals (i, f, t, b, n) VALUES (?, ?, ?, ?, ?)',
      args: [big, 2.5, 'zażółć', new Uint8Array([0, 255, 7]), null],
    });
    expect(ins.rowsAffected).toBe(1);
    expect(ins.lastInsertRowid).toBe(1n);

    const rs = await c.execute({ sql: 'SELECT i, f, t, b, n, typeof(f) AS tf FROM vals WHERE t = :t AND i = $i', args: { t: 'zażółć', $i: big } });
    expect(rs.columns).toEqual(['i', 'f', 't', 'b', 'n', 'tf']);
    expect(rs.columnTypes).toEqual(['INTEGER', 'REAL', 'TEXT', 'BLOB', 'TEXT', '']);
    const row = rs.rows[0]!;
    expect(row.i).toBe(big);
    expect(row.f).toBe(2.5);
    expect(row.t).toBe('zażółć');
    expect([...new Uint8Array(row.b as ArrayBuffer)]).toEqual([0, 255, 7]);
    expect(row.n).toBeNull();
    expect(row.tf).toBe('real');

    const err = await c.execute('SELECT * FROM no_such_table').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LibsqlError);
    expect((err as LibsqlError).code).toBe('SQLITE_ERROR');
    expect((err as LibsqlError).message).toContain('no such table');
  });

  it('runs a batch atomically: all statements commit, or a failing one rolls back the rest', async () => {
    const c = client();
    await c.execute('CREATE TABLE items (name TEXT PRIMARY KEY)');
    const results = await c.batch(
      [
        { sql: 'INSERT INTO items VALUES (?)', args: ['a'] },
        { sql: 'INSERT INTO items VALUES (?)', args: ['b'] },
        'SELECT count(*) AS n FROM items',
      ],
      'write',
    );
    expect(results[2]!.rows[0]!.n).toBe(2);

    const err = await c
      .batch(
        [
          { sql: 'INSERT INTO items VALUES (?)', args: ['c'] },
          { sql: 'INSERT INTO items VALUES (?)', args: ['a'] }, // duplicate key
          { sql: 'INSERT INTO items VALUES (?)', args: ['d'] },
        ],
        'write',
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LibsqlBatchError);
    expect((err as LibsqlBatchError).statementIndex).toBe(1);
    expect((err as LibsqlBatchError).message).toContain('UNIQUE constraint failed');
    const names = await c.execute('SELECT name FROM items ORDER BY name');
    expect(names.rows.map((r) => r.name)).toEqual(['a', 'b']);
  });

  it('commits and rolls back interactive transactions, holding one stream per transaction', async () => {
    const c = client();
    const other = client();
    await c.execute('CREATE TABLE ledger (v INTEGER)');

    const tx = await c.transaction('write');
    await tx.execute({ sql: 'INSERT INTO ledger VALUES (?)', args: [1] });
    expect((await tx.execute('SELECT count(*) AS n FROM ledger')).rows[0]!.n).toBe(1);
    expect(sim.stats().openStreams).toBe(1);
    // Another connection does not see uncommitted rows.
    expect((await other.execute('SELECT count(*) AS n FROM ledger')).rows[0]!.n).toBe(0);
    await tx.commit();
    expect(sim.stats().openStreams).toBe(0);
    expect((await other.execute('SELECT count(*) AS n FROM ledger')).rows[0]!.n).toBe(1);

    const tx2 = await c.transaction('write');
    await tx2.execute({ sql: 'INSERT INTO ledger VALUES (?)', args: [2] });
    await tx2.rollback();
    expect(sim.stats().openStreams).toBe(0);
    expect((await other.execute('SELECT sum(v) AS s FROM ledger')).rows[0]!.s).toBe(1);
  });

  it('serialises concurrent write transactions (no lost update in read-modify-write)', async () => {
    const setup = client();
    await setup.execute('CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER)');
    await setup.execute('INSERT INTO counter VALUES (1, 0)');
    const workers = Array.from({ length: 4 }, () => client());
    const rounds = 5;
    await Promise.all(
      workers.map(async (c) => {
        for (let i = 0; i < rounds; i++) {
          const tx = await c.transaction('write');
          try {
            const n = Number((await tx.execute('SELECT n FROM counter WHERE id = 1')).rows[0]!.n);
            // A second request on the same stream: another transaction interleaving here would lose an update.
            await tx.execute({ sql: 'UPDATE counter SET n = ? WHERE id = 1', args: [n + 1] });
            await tx.commit();
          } finally {
            tx.close();
          }
        }
      }),
    );
    expect((await setup.execute('SELECT n FROM counter')).rows[0]!.n).toBe(workers.length * rounds);
  });

  it('serves @libsql/client/web the same way', async () => {
    const web = createWebClient({ url: sim.url, authToken: TOKEN });
    clients.push(web);
    await web.execute('CREATE TABLE web_t (x TEXT)');
    const tx = await web.transaction('write');
    await tx.execute({ sql: 'INSERT INTO web_t VALUES (?)', args: ['from-web'] });
    await tx.commit();
    expect((await web.execute('SELECT x FROM web_t')).rows[0]!.x).toBe('from-web');
  });

  it('refuses a missing or wrong token with 401 and executes nothing', async () => {
    await client().execute('CREATE TABLE guarded (x TEXT)');
    const wrong = client({ token: 'not-the-token' });
    const err = await wrong.execute("INSERT INTO guarded VALUES ('x')").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LibsqlError);
    expect((err as LibsqlError).code).toBe('UNAUTHORIZED');

    const raw = await pipeline(2, { baton: null, requests: [{ type: 'execute', stmt: { sql: "INSERT INTO guarded VALUES ('y')" } }] }, null);
    expect(raw.status).toBe(401);
    expect(raw.body).toEqual({ message: expect.stringContaining('bearer token'), code: 'UNAUTHORIZED' });
    expect(JSON.stringify(raw.body)).not.toContain(TOKEN);
    expect((await client().execute('SELECT count(*) AS n FROM guarded')).rows[0]!.n).toBe(0);
  });
});

describe('Hrana 3 JSON details (raw protocol)', () => {
  it('answers the version probes without a token', async () => {
    for (const path of ['v2', 'v3', 'v3-protobuf']) expect((await fetch(`${sim.url}/${path}`)).status).toBe(200);
  });

  it('carries a stream across requests by baton: stored SQL, autocommit state, conditions, close', async () => {
    const first = await pipeline(3, {
      baton: null,
      requests: [
        { type: 'sequence', sql: 'CREATE TABLE seq_t (x INTEGER); INSERT INTO seq_t VALUES (1);' },
        { type: 'store_sql', sql_id: 7, sql: 'INSERT INTO seq_t VALUES (?)' },
        { type: 'store_sql', sql_id: 7, sql: 'SELECT 1' },
        { type: 'execute', stmt: { sql: 'BEGIN' } },
        { type: 'get_autocommit' },
      ],
    });
    expect(first.status).toBe(200);
    expect(first.body.results.map((r: { type: string }) => r.type)).toEqual(['ok', 'ok', 'error', 'ok', 'ok']);
    expect(first.body.results[2].error.code).toBe('SQL_ID_IN_USE');
    expect(first.body.results[4].response).toEqual({ type: 'get_autocommit', is_autocommit: false });
    expect(typeof first.body.baton).toBe('string');

    const second = await pipeline(3, {
      baton: first.body.baton,
      requests: [
        {
          type: 'batch',
          batch: {
            steps: [
              { stmt: { sql_id: 7, args: [{ type: 'integer', value: '2' }] } },
              { condition: { type: 'not', cond: { type: 'is_autocommit' } }, stmt: { sql: 'SELECT count(*) FROM seq_t' } },
              { condition: { type: 'error', step: 0 }, stmt: { sql: 'SELECT 0' } },
              { stmt: { sql: 'SELECT * FROM missing' } },
              { condition: { type: 'and', conds: [{ type: 'ok', step: 1 }, { type: 'error', step: 3 }] }, stmt: { sql: 'COMMIT' } },
            ],
          },
        },
        { type: 'get_autocommit' },
        { type: 'close' },
        { type: 'get_autocommit' },
      ],
    });
    expect(second.status).toBe(200);
    const batch = second.body.results[0].response.result;
    expect(batch.step_results[1].rows).toEqual([[{ type: 'integer', value: '2' }]]);
    expect(batch.step_results[2]).toBeNull();
    expect(batch.step_errors[2]).toBeNull();
    expect(batch.step_errors[3].message).toContain('no such table');
    expect(batch.step_results[4]).not.toBeNull();
    expect(second.body.results[1].response.is_autocommit).toBe(true);
    expect(second.body.results[3]).toEqual({ type: 'error', error: { message: 'the stream is closed', code: 'STREAM_CLOSED' } });
    expect(second.body.baton).toBeNull();

    // A used baton is spent: replaying it is refused.
    const replay = await pipeline(3, { baton: first.body.baton, requests: [{ type: 'get_autocommit' }] });
    expect(replay.status).toBe(400);
    expect(replay.body.code).toBe('STREAM_EXPIRED');
  });

  it('streams a batch through /v3/cursor as JSON lines', async () => {
    const res = await fetch(`${sim.url}/v3/cursor`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({
        baton: null,
        batch: {
          steps: [
            { stmt: { sql: 'SELECT 1 AS a UNION ALL SELECT 2' } },
            { stmt: { sql: 'SELECT * FROM nowhere' } },
            { condition: { type: 'ok', step: 1 }, stmt: { sql: 'SELECT 3' } },
          ],
        },
      }),
    });
    expect(res.status).toBe(200);
    const lines = (await res.text()).trim().split('\n').map((l) => JSON.parse(l));
    expect(typeof lines[0].baton).toBe('string');
    expect(lines.slice(1).map((e: { type: string }) => e.type)).toEqual(['step_begin', 'row', 'row', 'step_end', 'step_error']);
    expect(lines[2].row).toEqual([{ type: 'integer', value: '1' }]);
    expect(lines[5].step).toBe(1);
    // The cursor's stream stays open under the returned baton until the client closes it.
    const closed = await pipeline(3, { baton: lines[0].baton, requests: [{ type: 'close' }] });
    expect(closed.body.baton).toBeNull();
  });

  it('describes a statement: parameters, columns, read-only', async () => {
    const res = await pipeline(3, {
      baton: null,
      requests: [
        { type: 'execute', stmt: { sql: 'CREATE TABLE d_t (id INTEGER, name TEXT)' } },
        { type: 'describe', sql: 'SELECT id, name FROM d_t WHERE id = ? AND name = :name' },
        { type: 'describe', sql: 'DELETE FROM d_t WHERE id = ?1' },
        { type: 'close' },
      ],
    });
    expect(res.body.results[1].response.result).toEqual({
      params: [{ name: null }, { name: ':name' }],
      cols: [
        { name: 'id', decltype: 'INTEGER' },
        { name: 'name', decltype: 'TEXT' },
      ],
      is_explain: false,
      is_readonly: true,
    });
    expect(res.body.results[2].response.result).toMatchObject({ params: [{ name: '?1' }], cols: [], is_readonly: false });
  });

  it('refuses a malformed body with 400 and a v3-only request on v2', async () => {
    const bad = await pipeline(2, { baton: null, requests: [{ type: 'execute' }] });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('PROTO_ERROR');
    expect((await pipeline(2, '{not json')).status).toBe(400);
    const v2 = await pipeline(2, { baton: null, requests: [{ type: 'get_autocommit' }, { type: 'close' }] });
    expect(v2.body.results[0].type).toBe('error');
  });

  it('expires an idle stream: its transaction is rolled back and its lock released', async () => {
    const short = await startHranaSim({ dbPath: join(dir, 'idle.db'), streamIdleMs: 150 });
    try {
      const c = createClient({ url: short.url });
      clients.push(c);
      await c.execute('CREATE TABLE idle_t (x INTEGER)');
      const tx = await c.transaction('write');
      await tx.execute('INSERT INTO idle_t VALUES (1)');
      await until('the idle stream to expire', () => short.stats().expiredStreams === 1);
      const err = await tx.commit().catch((e: unknown) => e);
      expect((err as LibsqlError).code).toBe('STREAM_EXPIRED');
      // The abandoned write lock is gone: another writer gets through, and the row never landed.
      await c.execute('INSERT INTO idle_t VALUES (2)');
      expect((await c.execute('SELECT x FROM idle_t')).rows.map((r) => r.x)).toEqual([2]);
    } finally {
      await short.close();
    }
  });
});

describe('Hrana 3 over Protobuf (@libsql/hrana-client at protocol version 3)', () => {
  it('negotiates v3-protobuf and runs pipelines and cursors: autocommit state, conditions, 64-bit values', async () => {
    const client = hrana.openHttp(sim.url, TOKEN, undefined, undefined, 3);
    client.intMode = 'bigint';
    clients.push(client);
    expect(await client.getVersion()).toBe(3);
    const stream = client.openStream();
    await stream.run('CREATE TABLE pb (i INTEGER, f REAL, t TEXT, b BLOB, n TEXT)');
    expect(await stream.getAutocommit()).toBe(true);
    await stream.run('BEGIN');
    expect(await stream.getAutocommit()).toBe(false);
    const big = -9_007_199_254_740_993n;
    const ins = await stream.run(['INSERT INTO pb VALUES (?, ?, ?, ?, ?)', [big, 0.25, 'ünï', new Uint8Array([9, 8]), null]]);
    expect(ins.affectedRowCount).toBe(1);

    // A cursor batch (what the client uses on v3): the guarded step runs only inside the transaction.
    const batch = stream.batch(true);
    const inTx = batch.step().condition(hrana.BatchCond.not(hrana.BatchCond.isAutocommit(batch))).query('SELECT * FROM pb');
    const failing = batch.step().query('SELECT * FROM nowhere');
    await batch.execute();
    const rows = (await inTx)!.rows;
    expect(rows[0]!.i).toBe(big);
    expect(rows[0]!.f).toBe(0.25);
    expect(rows[0]!.t).toBe('ünï');
    expect([...new Uint8Array(rows[0]!.b as ArrayBuffer)]).toEqual([9, 8]);
    expect(rows[0]!.n).toBeNull();
    await expect(failing).rejects.toThrow('no such table');

    const described = await stream.describe('SELECT i FROM pb WHERE t = :t');
    expect(described.paramNames).toEqual([':t']);
    expect(described.isReadonly).toBe(true);
    await stream.run('ROLLBACK');
    expect(await stream.getAutocommit()).toBe(true);
    expect((await stream.queryValue('SELECT count(*) FROM pb')).value).toBe(0n);
    stream.close();
  });

  it('refuses a body that is not a PipelineReqBody with 400', async () => {
    const res = await fetch(`${sim.url}/v3-protobuf/pipeline`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf', authorization: `Bearer ${TOKEN}` },
      body: new Uint8Array([0x12, 0xff, 0x01]),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe('PROTO_ERROR');
  });
});

describe('the project database layer against the Hrana sim', () => {
  const opened: Database[] = [];
  afterAll(() => {
    for (const d of opened) d.close();
  });

  async function remote(): Promise<Database> {
    const d = await openDatabase({ url: sim.url, authToken: TOKEN });
    opened.push(d);
    return d;
  }

  it('opens a remote database, runs the migrations and reports them applied', async () => {
    const a = await remote();
    expect(a.local).toBe(false);
    await runMigrations(a);
    const status = await migrationStatus(a.client);
    expect(status.applied).toBe(status.expected);
    expect(status.expected).toBeGreaterThan(0);
    // A second runner starting against the same database finds nothing left to apply.
    const b = await remote();
    await runMigrations(b);
    expect(await migrationStatus(b.client)).toEqual(status);
  });

  it('lets two runners claim queued runs: each run goes to exactly one of them', async () => {
    const clock = { now: () => Date.now() };
    const [a, b] = [await remote(), await remote()];
    const jobsA = createJobs({ db: a.db, clock, bus: createRunBus() });
    const jobsB = createJobs({ db: b.db, clock, bus: createRunBus() });

    const single = await jobsA.enqueue({ kind: 'sim.one', exclusive: false });
    const [ra, rb] = await Promise.all([
      jobsA.claim({ workerId: 'runner-a', leaseMs: 30_000, kinds: ['sim.one'] }),
      jobsB.claim({ workerId: 'runner-b', leaseMs: 30_000, kinds: ['sim.one'] }),
    ]);
    expect([ra?.id, rb?.id].filter(Boolean)).toEqual([single.id]);
    const winner = ra ? 'runner-a' : 'runner-b';
    expect((await jobsB.get(single.id))?.leaseOwner).toBe(winner);

    const ids = new Set<string>();
    for (let i = 0; i < 12; i++) ids.add((await jobsA.enqueue({ kind: 'sim.many', exclusive: false })).id);
    const claimedBy = new Map<string, string>();
    const drain = async (jobs: typeof jobsA, worker: string) => {
      for (let i = 0; i < 50; i++) {
        const run = await jobs.claim({ workerId: worker, leaseMs: 30_000, kinds: ['sim.many'] });
        if (!run) return;
        expect(claimedBy.has(run.id)).toBe(false);
        claimedBy.set(run.id, worker);
      }
    };
    await Promise.all([drain(jobsA, 'a1'), drain(jobsB, 'b1'), drain(jobsA, 'a2'), drain(jobsB, 'b2')]);
    expect([...claimedBy.keys()].sort()).toEqual([...ids].sort());
    const someRun = [...ids][0]!;
    expect((await jobsB.events(someRun)).map((e) => e.type)).toEqual(['queued', 'started']);
    // Foreign keys hold on every stream without a PRAGMA from the client: deleting a run cascades.
    await b.client.execute({ sql: 'DELETE FROM runs WHERE id = ?', args: [someRun] });
    expect(await jobsA.events(someRun)).toEqual([]);
  });

  it('keeps the one-active-run-per-cluster rule across runners (unique index errors pass through)', async () => {
    const clock = { now: () => Date.now() };
    const [a, b] = [await remote(), await remote()];
    const jobsA = createJobs({ db: a.db, clock, bus: createRunBus() });
    const jobsB = createJobs({ db: b.db, clock, bus: createRunBus() });
    const first = await jobsA.enqueue({ kind: 'sim.apply', clusterId: 'cl_sim', exclusive: true });
    const err = await jobsB.enqueue({ kind: 'sim.apply', clusterId: 'cl_sim', exclusive: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActiveRunConflict);
    expect((err as ActiveRunConflict).activeRunId).toBe(first.id);
  });
});

describe('the simulator CLI', () => {
  it('serves a database file on the given port until SIGTERM', async () => {
    const child = execa(process.execPath, ['--import', 'tsx', 'test/sim/hrana/main.ts', '--port', '0', '--db', join(dir, 'cli.db')], {
      env: { HRANA_SIM_TOKEN: 'cli-token' },
      reject: false,
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        const timer = setTimeout(() => reject(new Error(`no listening line from the CLI: ${out}`)), 15_000);
        child.stdout!.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const m = /listening on (http:\/\/\S+)/.exec(out);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        });
      });
      const c = createClient({ url, authToken: 'cli-token' });
      clients.push(c);
      expect((await c.execute('SELECT 40 + 2 AS n')).rows[0]!.n).toBe(42);
      const refused = await createClient({ url, authToken: 'wrong' }).execute('SELECT 1').catch((e: unknown) => e);
      expect((refused as LibsqlError).code).toBe('UNAUTHORIZED');
    } finally {
      child.kill('SIGTERM');
    }
    const done = await child;
    expect(done.exitCode).toBe(0);
  });
});
