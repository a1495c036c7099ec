// STUN Binding (RFC 8489) to learn the hub's public address, and NAT mapping behaviour by asking two servers.
import { randomBytes } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { isIP } from 'node:net';
import { formatIp } from '../talos/net.ts';

const MAGIC = 0x2112a442;
const BINDING_REQUEST = 0x0001;
const BINDING_SUCCESS = 0x0101;
const BINDING_ERROR = 0x0111;
const XOR_MAPPED_ADDRESS = 0x0020;
const MAPPED_ADDRESS = 0x0001;
const ERROR_CODE = 0x0009;

export interface StunServer {
  host: string;
  port: number;
}
export interface MappedAddress {
  address: string;
  port: number;
  family: 4 | 6;
}

export class StunError extends Error {
  override name = 'StunError';
}

export function bindingRequest(txid: Buffer): Buffer {
  const msg = Buffer.alloc(20);
  msg.writeUInt16BE(BINDING_REQUEST, 0);
  msg.writeUInt16BE(0, 2);
  msg.writeUInt32BE(MAGIC, 4);
  txid.copy(msg, 8);
  return msg;
}

function readAddress(value: Buffer, txid: Buffer, xor: boolean): MappedAddress {
  const family = value[1] === 0x01 ? 4 : value[1] === 0x02 ? 6 : 0;
  if (family === 0) throw new StunError('unknown address family');
  const port = value.readUInt16BE(2) ^ (xor ? MAGIC >>> 16 : 0);
  const raw = Buffer.from(value.subarray(4, family === 4 ? 8 : 20));
  if (xor) {
    const mask = Buffer.concat([Buffer.alloc(4), txid]);
    mask.writeUInt32BE(MAGIC, 0);
    for (let i = 0; i < raw.length; i++) raw[i] = (raw[i] as number) ^ (mask[i] as number);
  }
  const address = formatIp({ family, value: BigInt(`0x${raw.toString('hex')}`) });
  return { address, port, family };
}

/** Parses a Binding response for this transaction; null when it is not one (a stray datagram). */
export function parseBindingResponse(msg: Buffer, txid: Buffer): MappedAddress | null {
  if (msg.length < 20 || msg.readUInt32BE(4) !== MAGIC || !msg.subarray(8, 20).equals(txid)) return null;
  const type = msg.readUInt16BE(0);
  const end = Math.min(msg.length, 20 + msg.readUInt16BE(2));
  let mapped: MappedAddress | null = null;
  let fallback: MappedAddress | null = null;
  for (let off = 20; off + 4 <= end; ) {
    const attr = msg.readUInt16BE(off);
    const len = msg.readUInt16BE(off + 2);
    const value = msg.subarray(off + 4, off + 4 + len);
    if (type === BINDING_ERROR && attr === ERROR_CODE && len >= 4) {
      throw new StunError(`STUN error ${(value[2] as number) * 100 + (value[3] as number)}: ${value.subarray(4).toString('utf8')}`);
    }
    if (attr === XOR_MAPPED_ADDRESS) mapped = readAddress(value, txid, true);
    if (attr === MAPPED_ADDRESS) fallback = readAddress(value, txid, false);
    off += 4 + Math.ceil(len / 4) * 4; // attributes are padded to 4 bytes
  }
  if (type === BINDING_ERROR) throw new StunError('STUN error response');
  if (type !== BINDING_SUCCESS) return null;
  const result = mapped ?? fallback;
  if (!result) throw new StunError('Binding response without a mapped address');
  return result;
}

/**
 * One Binding transaction from `socket` (so the mapping seen is that socket's), retransmitted with
 * doubling intervals from 250 ms until `timeoutMs`.
 */
export async function stunBinding(socket: Socket, server: StunServer, timeoutMs = 3_000): Promise<MappedAddress> {
  const txid = randomBytes(12);
  const request = bindingRequest(txid);
  return new Promise<MappedAddress>((resolve, reject) => {
    let rto = 250;
    let timer: NodeJS.Timeout | undefined;
    const started = Date.now();
    const done = (fn: () => void) => {
      clearTimeout(timer);
      clearTimeout(overall);
      socket.off('message', onMessage);
      fn();
    };
    const onMessage = (msg: Buffer) => {
      try {
        const r = parseBindingResponse(msg, txid);
        if (r) done(() => resolve(r));
      } catch (err) {
        done(() => reject(err));
      }
    };
    const send = () => {
      // With a callback a failed send (a name that does not resolve while the uplink is down) is
      // this transaction's failure; without one it is an 'error' event nobody listens for, which
      // ends the process.
      socket.send(request, server.port, server.host, (err) => {
        if (err) done(() => reject(new StunError(`cannot send to STUN server ${server.host}:${server.port}: ${err.message}`)));
      });
      rto *= 2;
      if (Date.now() - started + rto < timeoutMs) timer = setTimeout(send, rto);
    };
    const overall = setTimeout(() => done(() => reject(new StunError(`no STUN answer from ${server.host}:${server.port} within ${timeoutMs} ms`))), timeoutMs);
    socket.on('message', onMessage);
    send();
  });
}

export type NatMapping = 'none' | 'endpoint-independent' | 'endpoint-dependent' | 'unknown';

export interface NatReport {
  mapping: NatMapping;
  /** the public endpoint to give nodes; null when the mapping is endpoint-dependent (use a relay) or unknown */
  endpoint: MappedAddress | null;
  observed: { server: string; mapped: MappedAddress | null; error?: string }[];
}

/**
 * Asks two servers from one socket. The same mapping from both means endpoint-independent (a node
 * dialling that address reaches us); different mappings mean a symmetric NAT, where only a relay works.
 */
export async function detectNat(servers: StunServer[], opts: { bindAddress?: string; port?: number; timeoutMs?: number } = {}): Promise<NatReport> {
  if (servers.length < 2) throw new StunError('NAT detection needs two STUN servers');
  const family = isIP(opts.bindAddress ?? '') === 6 || isIP(servers[0]?.host ?? '') === 6 ? 'udp6' : 'udp4';
  const socket = createSocket(family);
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(opts.port ?? 0, opts.bindAddress, () => resolve());
  });
  try {
    const observed: NatReport['observed'] = [];
    for (const s of servers.slice(0, 2)) {
      const name = `${s.host}:${s.port}`;
      try {
        observed.push({ server: name, mapped: await stunBinding(socket, s, opts.timeoutMs) });
      } catch (err) {
        observed.push({ server: name, mapped: null, error: (err as Error).message });
      }
    }
    const [a, b] = observed.map((o) => o.mapped);
    const local = socket.address();
    if (!a || !b) return { mapping: 'unknown', endpoint: a ?? b ?? null, observed };
    if (a.address !== b.address || a.port !== b.port) return { mapping: 'endpoint-dependent', endpoint: null, observed };
    const mapping = a.port === local.port && a.address === local.address ? 'none' : 'endpoint-independent';
    return { mapping, endpoint: a, observed };
  } finally {
    socket.close();
  }
}

/** `host:port` list, e.g. from configuration. */
export function parseStunServers(text: string): StunServer[] {
  return text.split(',').map((s) => s.trim()).filter(Boolean).map((s) => {
    const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(s);
    if (!m) throw new StunError(`STUN server ${JSON.stringify(s)} must be host:port`);
    return { host: (m[1] ?? m[2]) as string, port: Number(m[3]) };
  });
}
