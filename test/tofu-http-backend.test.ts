import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { backendConfigArgs } from '../lib/tofu/backend.ts';
import { resolveTofuBinary } from '../lib/tofu/binary.ts';
import type { RunEvent } from '../lib/tofu/messages.ts';
import { moduleDirFor, TofuCommandError, TofuWorkspace } from '../lib/tofu/workspace.ts';

// A minimal http state backend on loopback, just enough to show that the workspace speaks to
// one the way tofu expects (the product's own backend lives elsewhere).
const USER = 'rezus';
const PASSWORD = 'http-backend-password-777';
const requests: { method: string; url: string; authorized: boolean }[] = [];
let state: string | undefined;
let lock: { ID: string } | undefined;

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const authorized = req.headers.authorization === `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
    requests.push({ method: req.method ?? '', url: req.url ?? '', authorized });
    if (!authorized) return res.writeHead(401).end();
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    switch (req.method) {
      case 'GET':
        return state === undefined ? res.writeHead(204).end() : res.writeHead(200).end(state);
      case 'POST':
        if (lock && url.searchParams.get('ID') !== lock.ID) return res.writeHead(423).end(JSON.stringify(lock));
        state = body;
        return res.writeHead(200).end();
      case 'LOCK':
        if (lock) return res.writeHead(423, { 'content-type': 'application/json' }).end(JSON.stringify(lock));
        lock = JSON.parse(body) as { ID: string };
        return res.writeHead(200).end();
      case 'UNLOCK':
        lock = undefined;
        return res.writeHead(200).end();
      default:
        return res.writeHead(405).end();
    }
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const address = `http://127.0.0.1:${(server.address() as AddressInfo).port}/state/tenant-1/cluster-h`;

const hostPath = process.env.PATH ?? '/usr/bin:/bin';
const modulesRoot = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'modules');
const root = await mkdtemp(path.join(tmpdir(), 'rezus-tofu-http-'));
const binary = (await resolveTofuBinary({ env: { PATH: hostPath } })).path;

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await rm(root, { recursive: true, force: true });
});

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await filesUnder(p)));
    else out.push(p);
  }
  return out;
}

describe('http backend', () => {
  const ws = new TofuWorkspace({
    binary,
    dataDir: path.join(root, 'data'),
    tenantId: 'tenant-1',
    clusterId: 'cluster-h',
    moduleDir: moduleDirFor(modulesRoot, 'local'),
    backend: { kind: 'http', address, username: USER, password: PASSWORD },
    pathEnv: hostPath,
    timeoutMs: 60_000,
  });
  const vars = { cluster_name: 'home', machines: { 'cp-1': { role: 'controlplane', user_data: 'machine-config-http-test' } } };
  const events: RunEvent[] = [];

  it('never puts the password in the arguments', () => {
    const args = backendConfigArgs({ kind: 'http', address, username: USER, password: PASSWORD });
    expect(args).toEqual([
      `-backend-config=address=${address}`,
      `-backend-config=lock_address=${address}`,
      `-backend-config=unlock_address=${address}`,
      '-backend-config=lock_method=LOCK',
      '-backend-config=unlock_method=UNLOCK',
    ]);
  });

  it('keeps state in the backend with locking and Basic auth', async () => {
    await ws.init({ onEvent: (e) => events.push(e) });
    const run = await ws.createRunFiles(vars);
    try {
      const plan = await ws.plan({ varFile: run.varFile, outFile: run.planFile, onEvent: (e) => events.push(e) });
      expect(plan.summary.add).toBe(1);
      await ws.apply(run.planFile, { onEvent: (e) => events.push(e) });
    } finally {
      await run.dispose();
    }
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.every((r) => r.authorized)).toBe(true);
    const methods = requests.map((r) => r.method);
    expect(methods).toContain('LOCK');
    expect(methods).toContain('UNLOCK');
    expect(requests.some((r) => r.method === 'POST' && /[?&]ID=/.test(r.url))).toBe(true);
    expect(lock).toBeUndefined();
    const saved = JSON.parse(state ?? '{}') as { resources: { type: string }[] };
    expect(saved.resources.map((r) => r.type)).toEqual(['terraform_data']);
    expect(Object.keys((await ws.outputs()).machines?.value as object)).toEqual(['cp-1']);
  });

  it('leaves the password nowhere on disk and out of events', async () => {
    for (const f of await filesUnder(ws.dir)) {
      if (f.includes(`${path.sep}providers${path.sep}`)) continue;
      expect(await readFile(f, 'utf8'), f).not.toContain(PASSWORD);
    }
    expect(JSON.stringify(events)).not.toContain(PASSWORD);
  });

  it('fails fast, naming the lock, when another run holds the state', async () => {
    lock = { ID: '5f2b7f5e-0000-4000-8000-000000000001' };
    const run = await ws.createRunFiles(vars);
    try {
      const err = await ws.plan({ varFile: run.varFile }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TofuCommandError);
      expect((err as Error).message).toMatch(/lock/i);
    } finally {
      lock = undefined;
      await run.dispose();
    }
  });
});
