// Address arithmetic without node:net, so the HTTP-edge validators also run on Workers.

export type IpFamily = 4 | 6;

export interface ParsedIp {
  family: IpFamily;
  value: bigint;
}

function parseIpv4(text: string): bigint | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    if (!/^(0|[1-9]\d{0,2})$/.test(part) || Number(part) > 255) return undefined;
    value = (value << 8n) | BigInt(part);
  }
  return value;
}

function parseIpv6(text: string): bigint | undefined {
  if (text.includes('%')) return undefined; // zone ids make no sense in a certificate or a subnet
  let head = text;
  let tail = '';
  const doubleColon = text.indexOf('::');
  if (doubleColon !== -1) {
    if (text.indexOf('::', doubleColon + 1) !== -1) return undefined;
    head = text.slice(0, doubleColon);
    tail = text.slice(doubleColon + 2);
  }
  const groups = (part: string): number[] | undefined => {
    if (part === '') return [];
    const out: number[] = [];
    const pieces = part.split(':');
    for (let i = 0; i < pieces.length; i++) {
      const piece = pieces[i] as string;
      if (i === pieces.length - 1 && piece.includes('.')) {
        const v4 = parseIpv4(piece);
        if (v4 === undefined) return undefined;
        out.push(Number(v4 >> 16n), Number(v4 & 0xffffn));
      } else if (/^[0-9a-fA-F]{1,4}$/.test(piece)) {
        out.push(parseInt(piece, 16));
      } else {
        return undefined;
      }
    }
    return out;
  };
  const first = groups(head);
  const last = groups(tail);
  if (!first || !last) return undefined;
  const missing = 8 - first.length - last.length;
  if (doubleColon === -1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...first, ...Array<number>(doubleColon === -1 ? 0 : missing).fill(0), ...last];
  return all.reduce((acc, g) => (acc << 16n) | BigInt(g), 0n);
}

export function parseIp(text: string): ParsedIp | undefined {
  const v4 = parseIpv4(text);
  if (v4 !== undefined) return { family: 4, value: v4 };
  const v6 = parseIpv6(text);
  if (v6 !== undefined) return { family: 6, value: v6 };
  return undefined;
}

/** RFC 5952 text form, so the same address always renders the same way. */
export function formatIp(ip: ParsedIp): string {
  if (ip.family === 4) {
    return [24n, 16n, 8n, 0n].map((shift) => String((ip.value >> shift) & 0xffn)).join('.');
  }
  const groups = Array.from({ length: 8 }, (_, i) => Number((ip.value >> BigInt((7 - i) * 16)) & 0xffffn));
  let bestStart = -1;
  let bestLength = 1; // a single zero group is not shortened
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart === -1) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}

export function canonicalIp(text: string): string | undefined {
  const parsed = parseIp(text);
  return parsed ? formatIp(parsed) : undefined;
}

export interface ParsedCidr {
  family: IpFamily;
  network: bigint;
  prefix: number;
  /** true when bits below the prefix are set (e.g. 10.0.0.1/8) */
  hostBitsSet: boolean;
}

export function parseCidr(text: string): ParsedCidr | undefined {
  const slash = text.indexOf('/');
  if (slash === -1) return undefined;
  const ip = parseIp(text.slice(0, slash));
  const prefixText = text.slice(slash + 1);
  if (!ip || !/^(0|[1-9]\d{0,2})$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  const bits = ip.family === 4 ? 32 : 128;
  if (prefix > bits) return undefined;
  const hostMask = (1n << BigInt(bits - prefix)) - 1n;
  return { family: ip.family, network: ip.value & ~hostMask, prefix, hostBitsSet: (ip.value & hostMask) !== 0n };
}

export function cidrsOverlap(a: ParsedCidr, b: ParsedCidr): boolean {
  if (a.family !== b.family) return false;
  const bits = a.family === 4 ? 32 : 128;
  const shorter = Math.min(a.prefix, b.prefix);
  const shift = BigInt(bits - shorter);
  return a.network >> shift === b.network >> shift;
}
