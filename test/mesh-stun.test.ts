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
