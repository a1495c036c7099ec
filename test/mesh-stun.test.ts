import { createSocket } from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectNat, parseStunServers, stunBinding } from '../lib/mesh/stun.ts';
import { freeUdpPort, startCoturns, type Coturns } from './support/coturn.ts';

// Real coturn instances (Debian `coturn`) in STUN-only mode on loopback.
let coturn: Coturns;
let servers: { port: number }[] = [];

beforeAll(async () => {
  coturn = await startCoturns(2);
  servers = coturn.ports.map((port) => ({ port }));
}, 20_000);

afterAll(async () => {
  await coturn?.stop();
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

describe('STUN with the uplink down', () => {
  // In a network namespace of its own (no interface up, so no name resolves and nothing leaves),
  // as a home whose internet is out: the check reports it and the process lives on.
  const probe = `import('${new URL('../lib/mesh/stun.ts', import.meta.url).pathname}').then(async ({ detectNat }) => {
    const r = await detectNat([{ host: 'stun.example.invalid', port: 3478 }, { host: 'stun2.example.invalid', port: 3478 }], { timeoutMs: 1500 });
    console.log(JSON.stringify(r));
  })`;
  const isRoot = process.getuid?.() === 0;

  it.skipIf(!isRoot)('reports names that do not resolve as the servers\' errors instead of crashing', async () => {
    const { execa } = await import('execa');
    const run = await execa('unshare', ['-n', process.execPath, '--import', 'tsx', '-e', probe], { reject: false, timeout: 30_000 });
    expect(run.stderr).not.toMatch(/Unhandled 'error' event/);
    expect(run.exitCode).toBe(0);
    const report = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as { mapping: string; observed: Array<{ error?: string }> };
    expect(report.mapping).toBe('unknown');
    expect(report.observed.map((o) => o.error)).toEqual([expect.stringMatching(/^cannot send to STUN server stun\.example\.invalid:3478: getaddrinfo/), expect.stringMatching(/stun2/)]);
  });
});
