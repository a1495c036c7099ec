import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectNat, parseStunServers, stunBinding } from '../lib/mesh/stun.ts';

// Real coturn instances (Debian `coturn`) in STUN-only mode on loopback.
const servers: { port: number; proc: ResultPromise }[] = [];
let dir = '';

async function freeUdpPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function startCoturn(): Promise<number> {
  const port = await freeUdpPort();
  const proc = execa('turnserver', [
    '-n', '--listening-ip=127.0.0.1', `--listening-port=${port}`, '--stun-only', '--no-tls', '--no-dtls', '--no-cli',
    `--pidfile=${join(dir, `${port}.pid`)}`, `--userdb=${join(dir, `${port}.db`)}`, '--log-file=stdout', '--simple-log',
  ], { reject: false, stdin: 'ignore' });
  servers.push({ port, proc });
  // Ready when it answers a Binding; bounded.
  const sock = createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  try {
    for (let i = 0; i < 40; i++) {
      try {
        await stunBinding(sock, { host: '127.0.0.1', port }, 250);
        return port;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    throw new Error('coturn did not answer');
  } finally {
    sock.close();
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rz-stun-'));
  await startCoturn();
  await startCoturn();
}, 20_000);

afterAll(async () => {
  for (const s of servers) {
    s.proc.kill('SIGTERM');
    await s.proc;
  }
  await rm(dir, { recursive: true, force: true });
});

describe('STUN against coturn', () => {
  it('learns the XOR-MAPPED-ADDRESS of the sending socket', async () => {
    const sock = createSocket('udp4');
    await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
    try {
      const mapped = await stunBinding(sock, { host: '127.0.0.1', port: servers[0]!.port });
      expect(mapped).toEqual({ address: '127.0.0.1', port: sock.address().port, family: 4 });
    } finally {
      sock.close();
    }
  });

  it('compares two servers: same mapping as the local socket means no NAT', async () => {
    const report = await detectNat(servers.map((s) => ({ host: '127.0.0.1', port: s.port })), { bindAddress: '127.0.0.1' });
    expect(report.mapping).toBe('none');
    expect(report.endpoint?.address).toBe('127.0.0.1');
    expect(report.observed.every((o) => o.mapped?.port === report.endpoint?.port)).toBe(true);
  });

  it('reports unknown when one server does not answer, and times out bounded', async () => {
    const silent = await freeUdpPort();
    const report = await detectNat([{ host: '127.0.0.1', port: servers[0]!.port }, { host: '127.0.0.1', port: silent }], { bindAddress: '127.0.0.1', timeoutMs: 600 });
    expect(report.mapping).toBe('unknown');
    expect(report.observed[1]?.error).toMatch(/no STUN answer/);
  });

  it('parses configured server lists', () => {
    expect(parseStunServers('stun.example.net:3478, [2001:db8::1]:3478')).toEqual([
      { host: 'stun.example.net', port: 3478 },
      { host: '2001:db8::1', port: 3478 },
    ]);
    expect(() => parseStunServers('nohost')).toThrow(/host:port/);
  });
});
