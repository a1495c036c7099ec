import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiClient, ApiFailure } from '../cli/client.ts';
import { followRun } from '../cli/follow.ts';

// The SSE follower against a loopback server that drops the stream mid-run, as a proxy or a
// runner restart would: the CLI must resume after the last event it saw, print nothing twice,
// and end on the server's `end` event. The same loopback server also shows what a run command sends.

let server: Server | undefined;
afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  server = createServer(handler);
  return new Promise((resolve) => server!.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server!.address() as AddressInfo).port}`)));
}

const event = (seq: number) => `id: ${seq}\nevent: run-event\ndata: ${JSON.stringify({ seq, at: 0, type: 'step', level: 'info', message: `step ${seq}` })}\n\n`;

describe('followRun', () => {
  it('resumes a dropped stream after the last event id and returns the ended run', async () => {
    const resumedFrom: (string | undefined)[] = [];
    let streams = 0;
    const url = await serve((req, res) => {
      if (req.url === '/v1/runs/run_x/events' && req.headers.accept === 'text/event-stream') {
        streams++;
        resumedFrom.push(req.headers['last-event-id'] as string | undefined);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        if (streams === 1) {
          res.write(': following run\n\n' + event(1) + event(2));
          // Let the client read both events, then cut the connection without an `end`.
          setTimeout(() => res.destroy(), 50);
          return;
        }
        // A server that resends from an older id: the client must not print event 2 again.
        res.end(event(2) + event(3) + `event: end\ndata: ${JSON.stringify({ id: 'run_x', state: 'succeeded' })}\n\n`);
        return;
      }
      if (req.url === '/v1/runs/run_x') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 'run_x', state: 'running' }));
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'not_found', message: 'no such route' } }));
    });

    const seen: number[] = [];
    const run = await followRun(new ApiClient(url, 't'), 'run_x', (e) => seen.push(e.seq));
    expect(seen).toEqual([1, 2, 3]);
    expect(run.state).toBe('succeeded');
    expect(resumedFrom).toEqual([undefined, '2']);
  });

  it("surfaces the API's error message instead of retrying", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'not_found', message: 'run not found' } }));
    });
    const err = await followRun(new ApiClient(url, 't'), 'run_gone', () => {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiFailure);
    expect(err).toMatchObject({ status: 404, code: 'not_found', message: 'run not found', exitCode: 3 });
  });
});

describe('followRun after the end', () => {
  it('reads every page of the JSON log when the stream is gone and the run has ended', async () => {
    const total = 2_503;
    const afters: number[] = [];
    const url = await serve((req, res) => {
      const u = new URL(req.url!, 'http://x');
      if (u.pathname === '/v1/runs/run_x/events' && req.headers.accept === 'text/event-stream') {
        // A stream that closes at once without `end`: the follower falls back to the JSON log.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(': following run\n\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      if (u.pathname === '/v1/runs/run_x') {
        res.end(JSON.stringify({ id: 'run_x', state: 'failed', error: 'boom' }));
        return;
      }
      const after = Number(u.searchParams.get('after'));
      afters.push(after);
      const last = Math.min(after + 1000, total);
      const events = Array.from({ length: last - after }, (_, i) => ({ seq: after + i + 1, at: 0, type: 'step', level: 'info', message: 'x' }));
      res.end(JSON.stringify({ run: { id: 'run_x', state: 'failed' }, events, more: last < total, next: last }));
    });

    const seen: number[] = [];
    const run = await followRun(new ApiClient(url, 't'), 'run_x', (e) => seen.push(e.seq));
    expect(run.state).toBe('failed');
    expect(afters).toEqual([0, 1000, 2000]);
    expect(seen).toEqual(Array.from({ length: total }, (_, i) => i + 1));
  });

  it('rezus logs (without -f) prints every page of a long log', async () => {
    const total = 1_204;
    const url = await serve((req, res) => {
      const u = new URL(req.url!, 'http://x');
      const after = Number(u.searchParams.get('after') ?? 0);
      const last = Math.min(after + 1000, total);
      const events = Array.from({ length: last - after }, (_, i) => ({ seq: after + i + 1, at: 0, type: 'step', level: 'info', message: `step ${after + i + 1}` }));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ run: { id: 'run_x', state: 'succeeded' }, events, more: last < total, next: last }));
    });
    const cli = fileURLToPath(new URL('../cli/main.ts', import.meta.url));
    const r = await execa(process.execPath, ['--import', 'tsx', cli, 'logs', 'run_x', '-o', 'json'], {
      env: { PATH: process.env.PATH ?? '', HOME: '/nonexistent', REZUS_URL: url, REZUS_TOKEN: 't' },
      extendEnv: false,
      reject: false,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(total);
    expect(JSON.parse(lines.at(-1)!).message).toBe(`step ${total}`);
  }, 30_000);
});

describe('upgrade-kubernetes', () => {
  it('sends includePendingConfig only when --include-pending-config is given', async () => {
    const bodies: unknown[] = [];
    const url = await serve((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        res.writeHead(req.method === 'POST' ? 202 : 200, { 'content-type': 'application/json' });
        if (req.url === '/v1/clusters/cl_x/upgrade-kubernetes') {
          bodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
          res.end(JSON.stringify({ run: { id: 'run_k', kind: 'upgrade-kubernetes', state: 'queued' } }));
        } else res.end(JSON.stringify({ clusters: [{ id: 'cl_x', name: 'lab' }] }));
      });
    });
    const cli = fileURLToPath(new URL('../cli/main.ts', import.meta.url));
    const env = { PATH: process.env.PATH ?? '', HOME: '/nonexistent', REZUS_URL: url, REZUS_TOKEN: 't' };
    for (const extra of [['--include-pending-config'], []]) {
      const r = await execa(process.execPath, ['--import', 'tsx', cli, 'upgrade-kubernetes', 'lab', '--to', '1.37.0', ...extra], { env, extendEnv: false, reject: false });
      expect(r.exitCode, r.stderr).toBe(0);
    }
    expect(bodies).toEqual([{ version: '1.37.0', includePendingConfig: true }, { version: '1.37.0' }]);
  }, 30_000);
});
