// X.509 v3 certificates (RFC 5280) as DER, built field by field and signed with node:crypto. Only
// what this product issues: Ed25519 and ECDSA P-256 keys, O/CN subjects, and the extensions Talos
// and Kubernetes look at. Go's crypto/x509 (Talos, kubectl) parses strictly, so every field is in
// its canonical DER form; the tests compare the bytes with another encoder's.
import { createHash, type KeyObject, sign } from 'node:crypto';
import { parseIp } from './net.ts';
import {
  bitStringOfBytes,
  booleanTrue,
  children,
  contextConstructed,
  contextPrimitive,
  explicit,
  namedBits,
  octetString,
  oid,
  readElement,
  sequence,
  setOf,
  smallInteger,
  TAG,
  time,
  tlv,
  unsignedInteger,
  type Element,
} from './x509-der.ts';

export type SignatureKind = 'ed25519' | 'ecdsa-p256';

// RFC 8410 (Ed25519: no parameters) and RFC 5758 (ecdsa-with-SHA256: parameters absent).
const SIGNATURE_ALGORITHM: Record<SignatureKind, Buffer> = {
  ed25519: sequence(oid('1.3.101.112')),
  'ecdsa-p256': sequence(oid('1.2.840.10045.4.3.2')),
};
const SIGNATURE_DIGEST: Record<SignatureKind, string | null> = { ed25519: null, 'ecdsa-p256': 'sha256' };

const ATTRIBUTE = { O: oid('2.5.4.10'), CN: oid('2.5.4.3') };
export type NameAttribute = { type: keyof typeof ATTRIBUTE; value: string };

const PRINTABLE = /^[A-Za-z0-9 '()+,\-./:=?]*$/;

/**
 * A Name with one attribute per RDN, in the order given. PrintableString when the value fits its
 * alphabet, UTF8String otherwise (what Go's pkix and OpenSSL choose too).
 */
export function encodeName(attributes: readonly NameAttribute[]): Buffer {
  return sequence(
    ...attributes.map(({ type, value }) =>
      setOf(sequence(ATTRIBUTE[type], tlv(PRINTABLE.test(value) ? TAG.PRINTABLE_STRING : TAG.UTF8_STRING, Buffer.from(value, 'utf8')))),
    ),
  );
}

// Encoded once: a certificate names the same few extensions and purposes every time.
const encodedOids = new Map<string, Buffer>();
function knownOid(dotted: string): Buffer {
  let encoded = encodedOids.get(dotted);
  if (!encoded) encodedOids.set(dotted, (encoded = oid(dotted)));
  return encoded;
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return critical ? sequence(knownOid(id), booleanTrue(), octetString(value)) : sequence(knownOid(id), octetString(value));
}

/** BasicConstraints, critical; cA FALSE is the DEFAULT, so a leaf's is an empty SEQUENCE. */
export const basicConstraints = (ca: boolean): Buffer => extension('2.5.29.19', true, ca ? sequence(booleanTrue()) : sequence());

export const KEY_USAGE_BIT = { digitalSignature: 0, keyEncipherment: 2, keyCertSign: 5, cRLSign: 6 } as const;

export const keyUsage = (bits: readonly number[]): Buffer => extension('2.5.29.15', true, namedBits(bits));

export const EXT_KEY_USAGE = { serverAuth: '1.3.6.1.5.5.7.3.1', clientAuth: '1.3.6.1.5.5.7.3.2' } as const;

export const extKeyUsage = (purposes: readonly string[]): Buffer => extension('2.5.29.37', false, sequence(...purposes.map(knownOid)));

export const subjectKeyIdentifier = (keyId: Buffer): Buffer => extension('2.5.29.14', false, octetString(keyId));

/** AuthorityKeyIdentifier with keyIdentifier [0] only. */
export const authorityKeyIdentifier = (keyId: Buffer): Buffer => extension('2.5.29.35', false, sequence(tlv(contextPrimitive(0), keyId)));

function ipOctets(text: string): Buffer {
  const ip = parseIp(text);
  if (!ip) throw new Error(`ipAddresses: ${JSON.stringify(text)} is not an IP address`);
  const bytes = Buffer.alloc(ip.family === 4 ? 4 : 16);
  let rest = ip.value;
  for (let i = bytes.length - 1; i >= 0; i--, rest >>= 8n) bytes[i] = Number(rest & 0xffn);
  return bytes;
}

/** SubjectAltName: dNSName [2] IA5String, iPAddress [7] OCTET STRING (4 or 16 bytes), DNS names first. */
export function subjectAltName(dnsNames: readonly string[], ipAddresses: readonly string[]): Buffer {
  const names = [
    ...dnsNames.map((name) => {
      // IA5String is 7-bit; a U-label would need converting to an A-label first.
      if (!/^[\x20-\x7e]+$/.test(name)) throw new Error(`dnsNames: ${JSON.stringify(name)} is not an ASCII host name`);
      return tlv(contextPrimitive(2), Buffer.from(name, 'latin1'));
    }),
    ...ipAddresses.map((ip) => tlv(contextPrimitive(7), ipOctets(ip))),
  ];
  return extension('2.5.29.17', false, sequence(...names));
}

/** RFC 5280 4.2.1.2 method (1): SHA-1 of the subjectPublicKey BIT STRING's bits. */
export function keyIdentifier(spki: Buffer): Buffer {
  const [, subjectPublicKey] = children(readElement(spki).content);
  if (subjectPublicKey?.tag !== TAG.BIT_STRING) throw new Error('SubjectPublicKeyInfo without a key');
  return createHash('sha1').update(subjectPublicKey.content.subarray(1)).digest();
}

export interface CertificateFields {
  /** big-endian magnitude; encoded as a positive INTEGER */
  serial: Uint8Array;
  issuer: Buffer;
  subject: Buffer;
  notBefore: Date;
  notAfter: Date;
  /** SubjectPublicKeyInfo DER */
  spki: Buffer;
  extensions: readonly Buffer[];
}

export function tbsCertificate(fields: CertificateFields, algorithm: SignatureKind): Buffer {
  return sequence(
    explicit(0, smallInteger(2)), // v3
    unsignedInteger(fields.serial),
    SIGNATURE_ALGORITHM[algorithm],
    fields.issuer,
    sequence(time(fields.notBefore), time(fields.notAfter)),
    fields.subject,
    fields.spki,
    explicit(3, sequence(...fields.extensions)),
  );
}

/** Signs a TBSCertificate; ECDSA signatures come from node:crypto already as DER Ecdsa-Sig-Value. */
export function signCertificate(tbs: Buffer, algorithm: SignatureKind, signingKey: KeyObject): Buffer {
  return sequence(tbs, SIGNATURE_ALGORITHM[algorithm], bitStringOfBytes(sign(SIGNATURE_DIGEST[algorithm], tbs, signingKey)));
}

/** What issuing needs from a CA certificate: its subject as encoded, its key, and its key identifier. */
export interface IssuerFields {
  subject: Buffer;
  spki: Buffer;
  /** the subjectKeyIdentifier extension's value, when the certificate has one */
  subjectKeyId?: Buffer;
}

const asTag = (element: Element | undefined, tag: number, what: string, of = 'CA certificate'): Element => {
  if (element?.tag !== tag) throw new Error(`${of}: ${what} is missing or malformed`);
  return element;
};

/** The TBSCertificate's fields, and the index of its serial number (an absent version, v1, shifts every field one to the left). */
function tbsFields(certificate: Buffer, of: string): { fields: Element[]; at: number } {
  const [tbsElement] = children(asTag(readElement(certificate), TAG.SEQUENCE, 'Certificate', of).content);
  const fields = children(asTag(tbsElement, TAG.SEQUENCE, 'TBSCertificate', of).content);
  return { fields, at: fields[0]?.tag === contextConstructed(0) ? 1 : 0 };
}

/**
 * The subjectPublicKeyInfo exactly as the certificate encodes it: what Talos hashes for a
 * certificate's fingerprint (Go's RawSubjectPublicKeyInfo), read in place rather than parsed into
 * a key and encoded again.
 */
export function readSubjectPublicKeyInfo(certificate: Buffer): Buffer {
  const { fields, at } = tbsFields(certificate, 'certificate');
  return asTag(fields[at + 5], TAG.SEQUENCE, 'subjectPublicKeyInfo', 'certificate').encoded;
}

export function readIssuerFields(certificate: Buffer): IssuerFields {
  const { fields, at } = tbsFields(certificate, 'CA certificate');
  const subject = asTag(fields[at + 4], TAG.SEQUENCE, 'subject');
  const spki = asTag(fields[at + 5], TAG.SEQUENCE, 'subjectPublicKeyInfo');
  let subjectKeyId: Buffer | undefined;
  const extensions = fields.slice(at + 6).find((f) => f.tag === contextConstructed(3));
  if (extensions) {
    for (const ext of children(asTag(children(extensions.content)[0], TAG.SEQUENCE, 'extensions').content)) {
      const parts = children(ext.content);
      if (!asTag(parts[0], TAG.OID, 'extension id').encoded.equals(knownOid('2.5.29.14'))) continue;
      const value = asTag(parts[parts.length - 1], TAG.OCTET_STRING, 'extension value');
      subjectKeyId = Buffer.from(asTag(readElement(value.content), TAG.OCTET_STRING, 'subjectKeyIdentifier').content);
    }
  }
  return { subject: Buffer.from(subject.encoded), spki: Buffer.from(spki.encoded), ...(subjectKeyId ? { subjectKeyId } : {}) };
}

