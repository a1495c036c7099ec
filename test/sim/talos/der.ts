/**
 * Just enough DER to issue the Ed25519 leaf certificates the simulators serve and tests present.
 * A sim mints one on every boot into a new config; through @peculiar/x509 (which builds and then
 * re-parses the certificate in asn1js) that was ~4 ms of CPU each, most of a simulated push's
 * cost. Building the bytes directly and signing with node:crypto is a small fraction of that.
 */
import { X509Certificate, type KeyObject, sign } from 'node:crypto';
import { isIPv4 } from 'node:net';

function lengthBytes(n: number): number[] {
  if (n < 0x80) return [n];
  const out: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) out.unshift(v & 0xff);
  return [0x80 | out.length, ...out];
}

export function tlv(tag: number, ...content: Uint8Array[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag, ...lengthBytes(body.length)]), body]);
}

const seq = (...c: Uint8Array[]) => tlv(0x30, ...c);

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number) as [number, number, ...number[]];
  const bytes = [40 * a + b];
  for (const arc of rest) {
    const groups: number[] = [];
    for (let v = arc; ; v = Math.floor(v / 128)) {
      groups.unshift((v & 0x7f) | (groups.length ? 0x80 : 0));
      if (v < 128) break;
    }
    bytes.push(...groups);
  }
  return tlv(0x06, Buffer.from(bytes));
}

/** GeneralizedTime from 2050 on, as RFC 5280 requires. */
function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14);
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(`${iso.slice(2)}Z`)) : tlv(0x18, Buffer.from(`${iso}Z`));
}

const ATTRIBUTE_OIDS: Record<string, string> = { CN: '2.5.4.3', O: '2.5.4.10', OU: '2.5.4.11' };

/** `CN=x` or `O=os:admin, O=os:reader`: one RDN per attribute, in the order written. */
export function name(dn: string): Buffer {
  const rdns = dn.split(/,\s*/).map((part) => {
    const eq = part.indexOf('=');
    const type = ATTRIBUTE_OIDS[part.slice(0, eq).trim()];
    if (!type) throw new Error(`unsupported attribute in ${dn}`);
    return tlv(0x31, seq(oid(type), tlv(0x0c, Buffer.from(part.slice(eq + 1), 'utf8'))));
  });
  return seq(...rdns);
}

function ipBytes(ip: string): Buffer {
  if (isIPv4(ip)) return Buffer.from(ip.split('.').map(Number));
  const [head, tail = ''] = ip.includes('::') ? ip.split('::') : [ip, undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h;
  return Buffer.from(groups.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]));
}

interface Tlv {
  tag: number;
  start: number;
  valueStart: number;
  end: number;
}

function read(buf: Buffer, at: number): Tlv {
  const tag = buf[at]!;
  let len = buf[at + 1]!;
  let valueStart = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[at + 2 + i]!;
    valueStart += n;
  }
  return { tag, start: at, valueStart, end: valueStart + len };
}

function children(buf: Buffer, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let at = parent.valueStart; at < parent.end; ) {
    const t = read(buf, at);
    out.push(t);
    at = t.end;
  }
  return out;
}

export interface IssuerFacts {
  /** The issuer's subject Name, byte for byte, so chain building matches it exactly. */
  subject: Buffer;
  /** Its subject key identifier, if it has one: the issued certificate's authority key id. */
  keyId: Buffer | undefined;
}

const SKI_OID = oid('2.5.29.14');

export function issuerFacts(certDer: Buffer): IssuerFacts {
  const tbs = read(certDer, read(certDer, 0).valueStart);
  const fields = children(certDer, tbs);
  const f = fields[0]!.tag === 0xa0 ? fields.slice(1) : fields;
  const subject = f[4]!;
  let keyId: Buffer | undefined;
  const extsWrapper = f.slice(6).find((t) => t.tag === 0xa3);
  if (extsWrapper) {
    for (const ext of children(certDer, read(certDer, extsWrapper.valueStart))) {
      const [id, ...rest] = children(certDer, ext);
      if (!id || !certDer.subarray(id.start, id.end).equals(SKI_OID)) continue;
      const value = rest[rest.length - 1]!;
      const inner = read(certDer, value.valueStart);
      keyId = certDer.subarray(inner.valueStart, inner.end);
    }
  }
  return { subject: certDer.subarray(subject.start, subject.end), keyId };
}

export interface LeafSpec {
  serial: Buffer;
  issuer: IssuerFacts;
  subject: string;
  notBefore: Date;
  notAfter: Date;
  /** SubjectPublicKeyInfo, DER. */
  spki: Buffer;
  extKeyUsage: string[];
  dnsNames: string[];
  ips: string[];
  /** The issuer's Ed25519 private key. */
  signer: KeyObject;
}

const ED25519 = seq(oid('1.3.101.112'));
const boolTrue = tlv(0x01, Buffer.from([0xff]));
const ext = (id: string, critical: boolean, value: Buffer) => seq(oid(id), ...(critical ? [boolTrue] : []), tlv(0x04, value));

/** An X.509 v3 end-entity certificate (PEM) signed with Ed25519. */
export function issueLeaf(spec: LeafSpec): string {
  const extensions = [
    ext('2.5.29.19', true, seq()),
    // keyUsage: digitalSignature only (bit 0; 7 unused bits).
    ext('2.5.29.15', true, tlv(0x03, Buffer.from([0x07, 0x80]))),
    ext('2.5.29.37', false, seq(...spec.extKeyUsage.map(oid))),
  ];
  if (spec.issuer.keyId) extensions.push(ext('2.5.29.35', false, seq(tlv(0x80, spec.issuer.keyId))));
  const sans = [...spec.dnsNames.map((d) => tlv(0x82, Buffer.from(d, 'ascii'))), ...spec.ips.map((ip) => tlv(0x87, ipBytes(ip)))];
  if (sans.length) extensions.push(ext('2.5.29.17', false, seq(...sans)));
  const tbs = seq(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))),
    tlv(0x02, spec.serial),
    ED25519,
    spec.issuer.subject,
    seq(time(spec.notBefore), time(spec.notAfter)),
    name(spec.subject),
    spec.spki,
    tlv(0xa3, seq(...extensions)),
  );
  const der = seq(tbs, ED25519, tlv(0x03, Buffer.from([0]), sign(null, tbs, spec.signer)));
  return new X509Certificate(der).toString();
}
