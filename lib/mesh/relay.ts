// A port-pair UDP relay for hubs behind symmetric NAT (Node-only; runs on a small public host).
// Node i dials relay:nodePortBase+i, exactly like a plain WireGuard endpoint; the hub dials out to
// relay:hubPortBase+i (with keepalive, which opens its NAT and tells the relay where it is). The
// relay copies datagrams between the pair and never sees plaintext: WireGuard stays end to end.
import { createSocket, type Socket } from 'node:dgram';

export interface RelayOptions {
  host: string;
  nodePortBase: number;
  hubPortBase: number;
  /** the host indexes (slots) to serve */
  slots: number[];
}

interface Remote {
  address: string;
  port: number;
}

/** WireGuard message types 1–4 with their fixed sizes (data: at least a header and tag). */
function looksLikeWireguard(msg: Buffer): boolean {
  if (msg.length < 4 || msg[1] !== 0 || msg[2] !== 0 || msg[3] !== 0) return false;
  switch (msg[0]) {
    case 1: return msg.length === 148;
    case 2: return msg.length === 92;
    case 3: return msg.length === 64;
    case 4: return msg.length >= 32;
    default: return false;
  }
}

async function bind(family: 'udp4' | 'udp6', host: string, port: number): Promise<Socket> {
  const s = createSocket(family);
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.bind(port, host, () => resolve());
  });
  return s;
}

export async function startRelay(opts: RelayOptions) {
  const family = opts.host.includes(':') ? 'udp6' : 'udp4';
  const sockets: Socket[] = [];
  let forwarded = 0;
  try {
    for (const slot of opts.slots) {
      const nodeSide = await bind(family, opts.host, opts.nodePortBase + slot);
      const hubSide = await bind(family, opts.host, opts.hubPortBase + slot);
      sockets.push(nodeSide, hubSide);
      let node: Remote | undefined;
      let hub: Remote | undefined;
      // The last sender of a well-formed WireGuard message is where replies go, as WireGuard's own
      // roaming does; garbage never moves the pair.
      nodeSide.on('message', (msg, from) => {
        if (!looksLikeWireguard(msg)) return;
        node = { address: from.address, port: from.port };
        if (hub) { hubSide.send(msg, hub.port, hub.address); forwarded++; }
      });
      hubSide.on('message', (msg, from) => {
        if (!looksLikeWireguard(msg)) return;
        hub = { address: from.address, port: from.port };
        if (node) { nodeSide.send(msg, node.port, node.address); forwarded++; }
      });
    }
  } catch (err) {
    for (const s of sockets) s.close();
    throw err;
  }
  return {
    get forwarded() { return forwarded; },
    close: () => { for (const s of sockets) s.close(); },
  };
}
