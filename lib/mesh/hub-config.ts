// The hub side: the `wg setconf` / `wg syncconf` text for RezusCloud's own interface.

export interface HubPeer {
  publicKey: string;
  ipv4: string;
  ipv6: string;
  /** Only for relayed nodes: the relay's hub-facing port. Direct nodes dial in and are learned by roaming. */
  endpoint?: string | null;
}

export interface HubConfigInput {
  privateKey: string;
  listenPort: number;
  peers: HubPeer[];
}

/** Keepalive toward relayed peers keeps the hub's own NAT mapping to the relay open, and tells the relay where the hub is. */
export const RELAY_KEEPALIVE_S = 25;

/**
 * One [Peer] per node, allowed exactly its overlay /32 and /128. Peers are sorted by public key so the
 * same set renders the same text. The text holds the private key: pass it on stdin, never in argv or logs.
 */
export function renderHubConfig(input: HubConfigInput): string {
  const lines = ['[Interface]', `PrivateKey = ${input.privateKey}`, `ListenPort = ${input.listenPort}`];
  const peers = [...input.peers].sort((a, b) => (a.publicKey < b.publicKey ? -1 : a.publicKey > b.publicKey ? 1 : 0));
  for (const p of peers) {
    lines.push('', '[Peer]', `PublicKey = ${p.publicKey}`, `AllowedIPs = ${p.ipv4}/32, ${p.ipv6}/128`);
    if (p.endpoint) lines.push(`Endpoint = ${p.endpoint}`, `PersistentKeepalive = ${RELAY_KEEPALIVE_S}`);
  }
  return `${lines.join('\n')}\n`;
}

export interface PeerStatus {
  publicKey: string;
  endpoint: string | null;
  allowedIps: string[];
  /** epoch ms; null when never */
  latestHandshake: number | null;
  rxBytes: number;
  txBytes: number;
  persistentKeepalive: number | null;
}

export interface InterfaceStatus {
  publicKey: string;
  listenPort: number;
  peers: PeerStatus[];
}

/**
 * Parses `wg show <if> dump`: a tab-separated interface line (private key, public key, listen
 * port, fwmark) then one line per peer (public key, preshared key, endpoint, allowed ips, latest
 * handshake in epoch seconds, rx, tx, persistent keepalive). The private key column is dropped here.
 */
export function parseWgDump(text: string): InterfaceStatus {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const head = lines[0]?.split('\t');
  if (!head || head.length < 4) throw new Error('wg dump: missing interface line');
  const num = (v: string | undefined) => (v === undefined || v === 'off' || v === '(none)' ? null : Number(v));
  const peers = lines.slice(1).map((line): PeerStatus => {
    const f = line.split('\t');
    if (f.length < 8) throw new Error('wg dump: short peer line');
    const handshake = Number(f[4]);
    return {
      publicKey: f[0] as string,
      endpoint: f[2] === '(none)' ? null : (f[2] as string),
      allowedIps: f[3] === '(none)' ? [] : (f[3] as string).split(','),
      latestHandshake: handshake > 0 ? handshake * 1000 : null,
      rxBytes: Number(f[5]),
      txBytes: Number(f[6]),
      persistentKeepalive: num(f[7]),
    };
  });
  return { publicKey: head[1] as string, listenPort: Number(head[2]), peers };
}
