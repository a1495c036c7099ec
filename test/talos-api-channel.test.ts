/**
 * The gRPC-over-HTTP/2 edges of lib/talos/api/node-channel.ts that a well-behaved simulator never
 * shows: replies split across DATA frames, trailers-only replies, non-gRPC HTTP answers, replies
 * cut inside a message, oversized and compressed messages, GOAWAY; the key exchange its TLS offers,
 * the certificate chain its client presents and the names it holds the node's certificate to. A
 * raw node:http2 server plays the node; each test says what it answers.
 */
import * as http2 from 'node:http2';
import * as net from 'node:net';
import * as tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { X509Certificate } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NodeChannel } from '../lib/talos/api/node-channel.ts';
import { CallFailure } from '../lib/talos/api/call-failure.ts';
import { decodeGrpcMessage, encodeMessage, grpcTimeout, MessageReader } from '../lib/talos/api/grpc-frames.ts';
import { createTalosSecureContext } from '../lib/talos/api/client.ts';
import { presentedChain } from '../lib/talos/api/client-chain.ts';
import type { TalosTlsOptions } from '../lib/talos/api/tls-connector.ts';
import { createTestOsCa, issueCert, issueTestClientCert, type TestCa, type TestKeyPair } from './sim/talos/index.ts';

type Handler = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, body: Buffer) => void;

let osCa: TestCa;
let serving: TestKeyPair;
beforeAll(async () => {
  osCa = await createTestOsCa();
  serving = await issueCert(osCa, { subject: 'CN=node', usage: 'server', ips: ['127.0.0.1'] });
});

const open: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of open.splice(0)) await close();
});

interface RawNode {
  port: number;
  sessions: number;
  requests: http2.IncomingHttpHeaders[];
}

async function rawNode(handle: Handler, tlsOptions: tls.SecureContextOptions & tls.TlsOptions = {}): Promise<RawNode> {
  const node: RawNode = { port: 0, sessions: 0, requests: [] };
  const server = http2.createSecureServer({ cert: serving.certPem, key: serving.keyPem, ALPNProtocols: ['h2'], ...tlsOptions });
  server.on('session', () => node.sessions++);
  server.on('stream', (stream, headers) => {
    node.requests.push(headers);
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => handle(stream, headers, Buffer.concat(chunks)));
    stream.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  node.port = (server.address() as AddressInfo).port;
  open.push(() => new Promise<void>((r) => server.close(() => r())));
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  open.unshift(async () => {
    for (const s of sessions) s.destroy();
  });
  return node;
}

/** A TCP relay to `port` whose open connections can go silent, as when a NAT drops its mappings. */
async function relay(port: number): Promise<{ port: number; silenceOpen(): void }> {
  const pipes = new Set<{ socket: net.Socket; silent: boolean }>();
  const server = net.createServer((inbound) => {
    const outbound = net.connect(port, '127.0.0.1');
    for (const [from, to] of [[inbound, outbound], [outbound, inbound]] as const) {
      const pipe = { socket: from, silent: false };
      pipes.add(pipe);
      from.on('data', (b) => {
        if (!pipe.silent) to.write(b);
      });
      from.on('error', () => {});
      from.on('close', () => to.destroy());
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  open.unshift(async () => {
    for (const p of pipes) p.socket.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return {
    port: (server.address() as AddressInfo).port,
    silenceOpen: () => {
      for (const p of pipes) p.silent = true;
    },
  };
}

function channel(node: { port: number }, maxMessageBytes = 1024, talosTls: TalosTlsOptions = { kind: 'maintenance', host: '127.0.0.1' }): NodeChannel {
  const c = new NodeChannel({ host: '127.0.0.1', port: node.port, authority: `127.0.0.1:${node.port}`, tls: talosTls, maxMessageBytes });
  open.unshift(async () => c.close());
  return c;
}

const GRPC = { ':status': 200, 'content-type': 'application/grpc' };

/** Answers every call with one message, 'ok', and status OK. */
const answerOk: Handler = (stream) => {
  stream.respond(GRPC, { waitForTrailers: true });
  stream.end(encodeMessage(Buffer.from('ok')));
  stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
};

/**
 * mTLS with `admin`'s certificate, trusting the PEM bundle `ca`, through the context the runner
 * builds once for a pass; with `shared: false`, without it (the client then builds its own).
 */
function mtlsOptions(ca: string, admin: TestKeyPair, opts: { serverName?: string; shared?: boolean } = {}): TalosTlsOptions {
  return {
    kind: 'configured',
    host: '127.0.0.1',
    ...(opts.serverName ? { serverName: opts.serverName } : {}),
    ca: Buffer.from(ca),
    cert: Buffer.from(admin.certPem),
    key: Buffer.from(admin.keyPem),
    ...(opts.shared === false ? {} : { secureContext: createTalosSecureContext(ca, admin.certPem, admin.keyPem) }),
  };
}

/** A channel over mTLS as mtlsOptions describes it, with the shared context. */
function mtlsChannel(node: { port: number }, ca: string, admin: TestKeyPair, serverName?: string): NodeChannel {
  return channel(node, 1024, mtlsOptions(ca, admin, serverName ? { serverName } : {}));
}

/** A node that answers OK over mTLS: it presents `cert` and takes only client certificates from the OS CA. */
function mtlsNode(cert: TestKeyPair = serving, tlsOptions: tls.SecureContextOptions = {}): Promise<RawNode> {
  return rawNode(answerOk, { cert: cert.certPem, key: cert.keyPem, ca: osCa.certPem, requestCert: true, rejectUnauthorized: true, ...tlsOptions });
}

async function call(c: NodeChannel, deadlineMs = 3000): Promise<{ messages: string[]; error?: CallFailure }> {
  const messages: string[] = [];
  try {
    await c.invoke({ path: '/machine.MachineService/Version', messages: [Buffer.from('ping')], deadlineMs, onMessage: (m) => messages.push(m.toString()) });
    return { messages };
  } catch (err) {
    expect(err).toBeInstanceOf(CallFailure);
    return { messages, error: err as CallFailure };
  }
}

describe('gRPC framing', () => {
  it('reassembles messages split at any byte and several in one chunk', () => {
    const wire = Buffer.concat([encodeMessage(Buffer.from('first')), encodeMessage(Buffer.alloc(0)), encodeMessage(Buffer.from('third one'))]);
    for (let cut = 0; cut <= wire.length; cut++) {
      const r = new MessageReader(100);
      const got = [...r.push(wire.subarray(0, cut)), ...r.push(wire.subarray(cut))].map((b) => b.toString());
      expect(got).toEqual(['first', '', 'third one']);
      expect(r.midMessage).toBe(false);
    }
    const r = new MessageReader(100);
    expect(r.push(wire.subarray(0, 7))).toEqual([]);
    expect(r.midMessage).toBe(true);
  });

  it('writes deadlines as grpc-timeout with at most eight digits', () => {
    expect(grpcTimeout(10_000)).toBe('10000m');
    expect(grpcTimeout(0.2)).toBe('1m');
    expect(grpcTimeout(99_999_999)).toBe('99999999m');
    expect(grpcTimeout(100_000_000)).toBe('100000S');
  });

  it('decodes percent-encoded grpc-message and keeps a malformed one as sent', () => {
    expect(decodeGrpcMessage('config%20rejected%3A%20%E2%9C%97')).toBe('config rejected: ✗');
    expect(decodeGrpcMessage('100%')).toBe('100%');
    expect(decodeGrpcMessage(undefined)).toBe('');
  });
});

describe('NodeChannel against a raw HTTP/2 node', () => {
  it('sends upstream request headers and reads a reply split over DATA frames', async () => {
    const node = await rawNode((stream, _h, body) => {
      expect(body.equals(encodeMessage(Buffer.from('ping')))).toBe(true);
      stream.respond(GRPC, { waitForTrailers: true });
      const reply = encodeMessage(Buffer.from('v1.13.9'));
      stream.write(reply.subarray(0, 3));
      setTimeout(() => stream.end(reply.subarray(3)), 20);
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    });
    const c = channel(node);
    expect(await call(c, 4000)).toEqual({ messages: ['v1.13.9'] });
    const h = node.requests[0]!;
    expect(h[':method']).toBe('POST');
    expect(h[':path']).toBe('/machine.MachineService/Version');
    expect(h['content-type']).toBe('application/grpc');
    expect(h['te']).toBe('trailers');
    expect(h['grpc-timeout']).toBe('4000m');
  });

  it('reads a status sent in the reply headers alone (trailers-only)', async () => {
    const node = await rawNode((stream) => stream.respond({ ...GRPC, 'grpc-status': '7', 'grpc-message': 'not%20authorized' }, { endStream: true }));
    const { error } = await call(channel(node));
    expect(error).toMatchObject({ code: 'permission-denied', status: 7, detail: 'not authorized' });
  });

  it('maps a plain HTTP error (a proxy, a wrong port) by the gRPC HTTP mapping', async () => {
    const node = await rawNode((stream) => stream.respond({ ':status': 404, 'content-type': 'text/plain' }, { endStream: true }));
    expect((await call(channel(node))).error).toMatchObject({ code: 'unimplemented', status: 12 });
    const busy = await rawNode((stream) => stream.respond({ ':status': 503 }, { endStream: true }));
    expect((await call(channel(busy))).error).toMatchObject({ code: 'connection-lost', status: 14 });
  });

  it('fails a reply that ends inside a message or without a status, and one whose connection drops', async () => {
    const cut = await rawNode((stream) => {
      stream.respond(GRPC, { waitForTrailers: true });
      stream.end(encodeMessage(Buffer.from('whole')).subarray(0, 7));
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    });
    expect((await call(channel(cut))).error).toMatchObject({ code: 'protocol' });
    const silent = await rawNode((stream) => {
      stream.respond(GRPC);
      stream.end(encodeMessage(Buffer.from('x')));
    });
    expect((await call(channel(silent))).error).toMatchObject({ code: 'protocol', status: 13 });
    const dropped = await rawNode((stream) => {
      stream.respond(GRPC);
      stream.write(encodeMessage(Buffer.from('x')));
      setTimeout(() => stream.session?.destroy(), 20);
    });
    expect((await call(channel(dropped))).error).toMatchObject({ code: 'connection-lost', status: 14 });
  });

  it('refuses messages over the size limit and compressed ones, and cancels the stream', async () => {
    let cancelled = 0;
    const big = await rawNode((stream) => {
      stream.on('close', () => {
        if (stream.rstCode === http2.constants.NGHTTP2_CANCEL) cancelled++;
      });
      stream.respond(GRPC);
      stream.write(encodeMessage(Buffer.alloc(2048)));
    });
    expect((await call(channel(big))).error).toMatchObject({ code: 'resource-exhausted', status: 8 });
    const zipped = await rawNode((stream) => {
      stream.respond({ ...GRPC, 'grpc-encoding': 'gzip' });
      const m = encodeMessage(Buffer.from('x'));
      m[0] = 1;
      stream.write(m);
    });
    expect((await call(channel(zipped))).error).toMatchObject({ code: 'protocol' });
    await new Promise((r) => setTimeout(r, 50));
    expect(cancelled).toBe(1);
  });

  it('keeps one connection across calls and dials again after the node sent GOAWAY', async () => {
    const node = await rawNode((stream) => {
      stream.respond(GRPC, { waitForTrailers: true });
      stream.end(encodeMessage(Buffer.from('ok')));
      stream.on('wantTrailers', () => {
        stream.sendTrailers({ 'grpc-status': '0' });
        if (node.requests.length === 2) stream.session?.goaway();
      });
    });
    const c = channel(node);
    for (let i = 0; i < 3; i++) expect((await call(c)).messages).toEqual(['ok']);
    expect(node.sessions).toBe(2);
  });

  it('ends a call at its deadline with RST_STREAM and stays usable', async () => {
    let reset = 0;
    const node = await rawNode((stream, headers) => {
      if (node.requests.length === 1) {
        stream.on('close', () => {
          if (stream.rstCode === http2.constants.NGHTTP2_CANCEL) reset++;
        });
        return; // never answers the first call
      }
      expect(headers['grpc-timeout']).toBe('3000m');
      stream.respond(GRPC, { waitForTrailers: true });
      stream.end(encodeMessage(Buffer.from('late ok')));
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    });
    const c = channel(node);
    expect((await call(c, 100)).error).toMatchObject({ code: 'deadline', status: 4 });
    expect((await call(c)).messages).toEqual(['late ok']);
    expect(reset).toBe(1);
    expect(node.sessions).toBe(1);
  });

  it('drops a connection that went silent (no PING answer) after a deadline, and dials afresh', async () => {
    const node = await rawNode(answerOk);
    const path = await relay(node.port);
    const c = channel(path);
    expect((await call(c)).messages).toEqual(['ok']);
    path.silenceOpen();
    expect((await call(c, 200)).error).toMatchObject({ code: 'deadline' });
    // Until the PING times out, calls still go to the dead connection; then a new one is dialled.
    const deadline = Date.now() + 10_000;
    let last = await call(c, 500);
    while (last.error && Date.now() < deadline) last = await call(c, 500);
    expect(last.messages).toEqual(['ok']);
    expect(node.sessions).toBe(2);
  });

  it('streams a reply far larger than HTTP/2\'s default window', async () => {
    const chunk = Buffer.alloc(256 * 1024, 7);
    const node = await rawNode((stream) => {
      stream.respond(GRPC, { waitForTrailers: true });
      for (let i = 0; i < 16; i++) stream.write(encodeMessage(chunk));
      stream.end();
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    });
    const c = channel(node, 1024 * 1024);
    let bytes = 0;
    await c.invoke({ path: '/machine.MachineService/EtcdSnapshot', messages: [Buffer.alloc(0)], deadlineMs: 10_000, onMessage: (m) => (bytes += m.length) });
    expect(bytes).toBe(16 * chunk.length);
  });
});

/**
 * What a dial's ClientHello offers for the key exchange: the groups it supports (extension 10) and
 * those it sent a key share for (extension 51), as TLS code points. The "node" reads the first TLS
 * record and hangs up.
 */
async function clientHelloGroups(talosTls: TalosTlsOptions): Promise<{ supported: number[]; shares: number[] }> {
  let hello!: (record: Buffer) => void;
  const record = new Promise<Buffer>((r) => (hello = r));
  const server = net.createServer((socket) => {
    let seen = Buffer.alloc(0);
    socket.on('error', () => {});
    socket.on('data', (b: Buffer) => {
      seen = Buffer.concat([seen, b]);
      if (seen.length >= 5 && seen.length >= 5 + seen.readUInt16BE(3)) {
        hello(seen.subarray(5, 5 + seen.readUInt16BE(3)));
        socket.destroy();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  open.unshift(() => new Promise<void>((r) => server.close(() => r())));
  const c = channel(server.address() as AddressInfo, 1024, talosTls);
  c.invoke({ path: '/machine.MachineService/Version', messages: [Buffer.alloc(0)], deadlineMs: 5_000, onMessage: () => {} }).catch(() => {});
  const body = await record;
  expect(body[0]).toBe(1); // ClientHello
  // handshake header, version, random; then session id, cipher suites and compression methods, each length-prefixed
  let at = 4 + 2 + 32;
  at += 1 + body[at]!;
  at += 2 + body.readUInt16BE(at);
  at += 1 + body[at]!;
  const end = at + 2 + body.readUInt16BE(at);
  const found: { supported: number[]; shares: number[] } = { supported: [], shares: [] };
  for (at += 2; at < end; ) {
    const type = body.readUInt16BE(at);
    const data = body.subarray(at + 4, at + 4 + body.readUInt16BE(at + 2));
    at += 4 + data.length;
    if (type === 10) for (let i = 2; i < data.length; i += 2) found.supported.push(data.readUInt16BE(i));
    if (type === 51) for (let i = 2; i < data.length; i += 4 + data.readUInt16BE(i + 2)) found.shares.push(data.readUInt16BE(i));
  }
  return found;
}

describe('the key exchange', () => {
  const X25519MLKEM768 = 0x11ec;
  const X25519 = 0x1d;
  const P256 = 0x17;

  it('offers the hybrid post-quantum key exchange on both channels: a node that takes only X25519MLKEM768 answers', async () => {
    const pq = { ecdhCurve: 'X25519MLKEM768' };
    const maintenance = await rawNode(answerOk, pq);
    // The node really refuses a client that offers classical X25519 alone.
    const classical = await new Promise<string>((resolve) => {
      const s = tls.connect({ host: '127.0.0.1', port: maintenance.port, ALPNProtocols: ['h2'], rejectUnauthorized: false, ecdhCurve: 'X25519' });
      s.once('secureConnect', () => {
        s.destroy();
        resolve('connected');
      });
      s.once('error', (err: NodeJS.ErrnoException) => {
        s.destroy();
        resolve(err.code ?? err.message);
      });
    });
    expect(classical).toMatch(/HANDSHAKE_FAILURE/);
    expect(await call(channel(maintenance))).toEqual({ messages: ['ok'] });

    const admin = await issueTestClientCert(osCa);
    const configured = await mtlsNode(serving, pq);
    expect(await call(mtlsChannel(configured, osCa.certPem, admin))).toEqual({ messages: ['ok'] });
  });

  it("sends the hybrid's key share first on every channel, so a Talos node needs no second round trip to pick it", async () => {
    const admin = await issueTestClientCert(osCa);
    for (const talosTls of [{ kind: 'maintenance' as const, host: '127.0.0.1' }, mtlsOptions(osCa.certPem, admin), mtlsOptions(osCa.certPem, admin, { shared: false })]) {
      const { supported, shares } = await clientHelloGroups(talosTls);
      expect(shares[0]).toBe(X25519MLKEM768);
      expect(supported[0]).toBe(X25519MLKEM768);
      expect(supported).toEqual(expect.arrayContaining([X25519, P256]));
    }
  });

  it('still reaches a node without the hybrid, over X25519 or P-256', async () => {
    const admin = await issueTestClientCert(osCa);
    for (const ecdhCurve of ['X25519', 'P-256']) {
      expect(await call(channel(await rawNode(answerOk, { ecdhCurve })))).toEqual({ messages: ['ok'] });
      expect(await call(mtlsChannel(await mtlsNode(serving, { ecdhCurve }), osCa.certPem, admin))).toEqual({ messages: ['ok'] });
    }
  });
});

/** The certificates a peer sent, leaf first, as fingerprints (a self-signed root ends the walk). */
function sentChain(socket: tls.TLSSocket): string[] {
  const out: string[] = [];
  let cert: tls.DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
  while (cert?.fingerprint256 && !out.includes(cert.fingerprint256)) {
    out.push(cert.fingerprint256);
    cert = cert.issuerCertificate;
  }
  return out;
}

describe('the client certificate chain', () => {
  const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;

  it('presents the admin certificate with the CA that issued it and no other certificate of the trust bundle', async () => {
    const other = await createTestOsCa({ organization: 'other' });
    const admin = await issueTestClientCert(osCa);
    const bundle = `${osCa.certPem}\n${other.certPem}`;
    const chains: string[][] = [];
    // No trust store on this node: what it knows of the client's chain came over the wire.
    const node = await rawNode(
      (stream, headers, body) => {
        chains.push(sentChain(stream.session!.socket as tls.TLSSocket));
        answerOk(stream, headers, body);
      },
      { requestCert: true, rejectUnauthorized: false },
    );
    expect(await call(mtlsChannel(node, bundle, admin))).toEqual({ messages: ['ok'] });
    expect(chains).toEqual([[fingerprint(admin.certPem), fingerprint(osCa.certPem)]]);
  });

  it('picks the issuer among CAs of the same name', async () => {
    const sameName = await createTestOsCa();
    const admin = await issueTestClientCert(osCa);
    const chain = presentedChain(Buffer.from(admin.certPem), Buffer.from(`${sameName.certPem}\n${osCa.certPem}`)).toString();
    expect(chain).toContain(osCa.certPem.trim());
    expect(chain).not.toContain(sameName.certPem.trim());
  });

  it('leaves a certificate as it is when its issuer is not in the bundle, it already carries a chain, or it does not parse', async () => {
    const other = await createTestOsCa();
    const admin = await issueTestClientCert(osCa);
    const leaf = Buffer.from(admin.certPem);
    const chained = presentedChain(leaf, Buffer.from(osCa.certPem));
    expect(chained.toString()).toContain(osCa.certPem.trim());
    expect(presentedChain(leaf, Buffer.from(other.certPem))).toBe(leaf);
    expect(presentedChain(chained, Buffer.from(osCa.certPem))).toBe(chained);
    const garbage = Buffer.from('-----BEGIN CERTIFICATE-----\n@@@\n-----END CERTIFICATE-----\n');
    expect(presentedChain(garbage, Buffer.from(osCa.certPem))).toBe(garbage);
  });
});

describe("the node's identity", () => {
  it('refuses a node whose certificate, from the right CA, is issued to another address, before sending a request', async () => {
    const admin = await issueTestClientCert(osCa);
    const elsewhere = await mtlsNode(await issueCert(osCa, { subject: 'CN=node', usage: 'server', ips: ['127.0.0.2'], dnsNames: ['localhost'] }));
    const { messages, error } = await call(mtlsChannel(elsewhere, osCa.certPem, admin));
    expect(messages).toEqual([]);
    expect(error?.code).toBe('tls');
    expect(error?.message).toMatch(/IP: 127\.0\.0\.1 is not in the cert's list: 127\.0\.0\.2/);
    expect(elsewhere.requests).toEqual([]);
    // The same certificate passes when it does name the address dialled.
    const here = await mtlsNode(await issueCert(osCa, { subject: 'CN=node', usage: 'server', ips: ['127.0.0.2', '127.0.0.1'] }));
    expect(await call(mtlsChannel(here, osCa.certPem, admin))).toEqual({ messages: ['ok'] });
  });

  it('checks a server name against the DNS names, and never an IP literal against the subject', async () => {
    const admin = await issueTestClientCert(osCa);
    const named = await mtlsNode(await issueCert(osCa, { subject: 'CN=127.0.0.1', usage: 'server', dnsNames: ['cp1.talos.local'] }));
    expect(await call(mtlsChannel(named, osCa.certPem, admin, 'cp1.talos.local'))).toEqual({ messages: ['ok'] });
    expect(await call(mtlsChannel(named, osCa.certPem, admin, 'CP1.Talos.Local'))).toEqual({ messages: ['ok'] });
    const other = await call(mtlsChannel(named, osCa.certPem, admin, 'cp2.talos.local'));
    expect(other.error?.code).toBe('tls');
    expect(other.error?.message).toMatch(/cp2\.talos\.local.* is not in the cert's altnames: DNS:cp1\.talos\.local/);
    // A CN that spells the address is not an IP SAN.
    const byAddress = await call(mtlsChannel(named, osCa.certPem, admin));
    expect(byAddress.error?.code).toBe('tls');
    expect(byAddress.error?.message).toMatch(/IP: 127\.0\.0\.1 is not in the cert's list/);
    expect(named.requests).toHaveLength(2);
  });
});
