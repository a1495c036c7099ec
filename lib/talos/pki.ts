// Talos-shaped PKI: CAs, leaf certificates, and keys in the PEM forms Talos writes. Certificates are
// DER built by x509-cert.ts and signed with node:crypto, so issuing loads no ASN.1 library and
// never parses its own output.
import { createHash, createPrivateKey, generateKeyPair, generateKeyPairSync, randomBytes, X509Certificate, type KeyObject } from 'node:crypto';
import { decodeSinglePem, encodePem } from './pem.ts';
import {
  authorityKeyIdentifier,
  basicConstraints,
  encodeName,
  EXT_KEY_USAGE,
  extKeyUsage,
  KEY_USAGE_BIT,
  keyIdentifier,
  keyUsage,
  readIssuerFields,
  signCertificate,
  subjectAltName,
  subjectKeyIdentifier,
  tbsCertificate,
  type NameAttribute,
  type SignatureKind,
} from './x509-cert.ts';

/** The key types Talos's PKI uses, which are also the signatures x509-cert.ts makes. */
export type KeyAlgorithm = SignatureKind;

/** A certificate with its private key, both PEM. The key uses the label Talos writes for its type. */
export interface CertAndKey {
  certPem: string;
  keyPem: string;
}

export interface SubjectSpec {
  organizations?: string[];
  commonName?: string;
}

const HOUR_MS = 3_600_000;
export const CA_VALIDITY_HOURS = 87_600; // 10 years, as upstream's CAs
export const CLIENT_VALIDITY_HOURS = 8_760; // 1 year, as upstream's admin certs
// Our clock and a node's clock can disagree; a certificate that starts "now" would be rejected by a
// node a few seconds behind, so validity starts a little in the past.
const CLOCK_SKEW_MS = 5 * 60_000;

/** The PEM label Talos (siderolabs/crypto) writes for Ed25519 keys; the body is PKCS#8. */
export const ED25519_KEY_LABEL = 'ED25519 PRIVATE KEY';
const TALOS_KEY_LABELS = [ED25519_KEY_LABEL, 'PRIVATE KEY', 'EC PRIVATE KEY', 'RSA PRIVATE KEY'] as const;

function serialNumber(): Buffer {
  const bytes = randomBytes(16);
  // Positive and without a leading zero byte, so the DER INTEGER keeps all 16 bytes.
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x40;
  return bytes;
}

function subjectName(subject: SubjectSpec): Buffer {
  const attributes: NameAttribute[] = (subject.organizations ?? []).map((value) => ({ type: 'O', value }));
  if (subject.commonName) attributes.push({ type: 'CN', value: subject.commonName });
  return encodeName(attributes);
}

/** Synchronous: for these key types it takes tens of microseconds, less than a threadpool round trip. */
function generateKeys(algorithm: KeyAlgorithm): { publicKey: KeyObject; privateKey: KeyObject } {
  return algorithm === 'ed25519' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'P-256' });
}

const spkiOf = (key: KeyObject): Buffer => key.export({ type: 'spki', format: 'der' });

const certificatePem = (der: Buffer): string => encodePem('CERTIFICATE', der);

/** Relabels a Talos-style key PEM into one Node's crypto and TLS accept. */
export function toNodeKeyPem(keyPem: string): string {
  const block = decodeSinglePem(keyPem, TALOS_KEY_LABELS);
  if (block.label !== ED25519_KEY_LABEL) return keyPem;
  return encodePem('PRIVATE KEY', block.der);
}

export function parsePrivateKey(keyPem: string): KeyObject {
  return createPrivateKey(toNodeKeyPem(keyPem));
}

/** Writes a private key the way siderolabs/crypto does: Ed25519 as PKCS#8 under its own label, EC as SEC1. */
export function toTalosKeyPem(key: KeyObject): string {
  switch (key.asymmetricKeyType) {
    case 'ed25519':
      return encodePem(ED25519_KEY_LABEL, key.export({ type: 'pkcs8', format: 'der' }));
    case 'ec':
      return key.export({ type: 'sec1', format: 'pem' }) as string;
    case 'rsa':
      return key.export({ type: 'pkcs1', format: 'pem' }) as string;
    default:
      throw new Error(`unsupported key type ${String(key.asymmetricKeyType)}`);
  }
}

function algorithmOf(key: KeyObject): KeyAlgorithm {
  if (key.asymmetricKeyType === 'ed25519') return 'ed25519';
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return 'ecdsa-p256';
  throw new Error('CA key must be Ed25519 or ECDSA P-256');
}

function validity(now: Date, hours: number): { notBefore: Date; notAfter: Date } {
  return { notBefore: new Date(now.getTime() - CLOCK_SKEW_MS), notAfter: new Date(now.getTime() + hours * HOUR_MS) };
}

export interface CreateCaOptions {
  algorithm: KeyAlgorithm;
  subject: SubjectSpec;
  validityHours?: number;
  now?: Date;
}

/** A self-signed CA shaped like upstream's (`NewTalosCA`, `NewKubernetesCA`, ...). */
export async function createCa(options: CreateCaOptions): Promise<CertAndKey> {
  const keys = generateKeys(options.algorithm);
  const spki = spkiOf(keys.publicKey);
  const name = subjectName(options.subject);
  const { notBefore, notAfter } = validity(options.now ?? new Date(), options.validityHours ?? CA_VALIDITY_HOURS);
  const extensions = [
    basicConstraints(true),
    keyUsage([KEY_USAGE_BIT.keyCertSign, KEY_USAGE_BIT.cRLSign, KEY_USAGE_BIT.digitalSignature]),
    extKeyUsage([EXT_KEY_USAGE.serverAuth, EXT_KEY_USAGE.clientAuth]),
    subjectKeyIdentifier(keyIdentifier(spki)),
  ];
  const tbs = tbsCertificate({ serial: serialNumber(), issuer: name, subject: name, notBefore, notAfter, spki, extensions }, options.algorithm);
  return { certPem: certificatePem(signCertificate(tbs, options.algorithm, keys.privateKey)), keyPem: toTalosKeyPem(keys.privateKey) };
}

interface Issuer {
  /** the CA's subject exactly as its certificate encodes it: chain building matches these bytes */
  name: Buffer;
  signingKey: KeyObject;
  algorithm: KeyAlgorithm;
  /** The same for every certificate the CA issues. */
  authorityKeyId: Buffer;
}

const issuers = new Map<string, Issuer>();
const MAX_ISSUERS = 64;

function loadIssuer(ca: CertAndKey): Issuer {
  const cert = new X509Certificate(ca.certPem);
  const signingKey = parsePrivateKey(ca.keyPem);
  const algorithm = algorithmOf(signingKey);
  if (!cert.checkPrivateKey(signingKey)) throw new Error('CA key does not match the CA certificate');
  const fields = readIssuerFields(cert.raw);
  // The CA's own key identifier when it states one (Go fills AuthorityKeyId from it the same way).
  return { name: fields.subject, signingKey, algorithm, authorityKeyId: authorityKeyIdentifier(fields.subjectKeyId ?? keyIdentifier(fields.spki)) };
}

/**
 * A CA parsed, its key loaded and checked against it once per process: every collect pass issues
 * from each cluster's OS and Kubernetes CAs again. Keyed by a digest so the map's keys hold no key
 * material; bounded, oldest first out.
 */
function issuerOf(ca: CertAndKey): Issuer {
  const id = createHash('sha256').update(ca.certPem).update('\0').update(ca.keyPem).digest('base64');
  let issuer = issuers.get(id);
  if (!issuer) {
    issuer = loadIssuer(ca);
    if (issuers.size >= MAX_ISSUERS) issuers.delete(issuers.keys().next().value!);
    issuers.set(id, issuer);
  }
  return issuer;
}

export type LeafUsage = 'client' | 'server';

export interface IssueLeafOptions {
  ca: CertAndKey;
  usage: LeafUsage;
  subject: SubjectSpec;
  dnsNames?: string[];
  ipAddresses?: string[];
  validityHours?: number;
  now?: Date;
}

/**
 * A leaf certificate signed by `ca`; its key has the CA's key type, as siderolabs/crypto does.
 * Client certs carry ExtKeyUsage clientAuth only: apid rejects a client chain with anything else.
 */
export async function issueLeaf(options: IssueLeafOptions): Promise<CertAndKey> {
  const issuer = issuerOf(options.ca);
  const keys = generateKeys(issuer.algorithm);
  const spki = spkiOf(keys.publicKey);
  const dnsNames = options.dnsNames ?? [];
  const ipAddresses = options.ipAddresses ?? [];
  const extensions = [
    basicConstraints(false),
    keyUsage([KEY_USAGE_BIT.digitalSignature]),
    extKeyUsage([options.usage === 'client' ? EXT_KEY_USAGE.clientAuth : EXT_KEY_USAGE.serverAuth]),
    subjectKeyIdentifier(keyIdentifier(spki)),
    issuer.authorityKeyId,
  ];
  if (dnsNames.length + ipAddresses.length > 0) extensions.push(subjectAltName(dnsNames, ipAddresses));
  const { notBefore, notAfter } = validity(options.now ?? new Date(), options.validityHours ?? CLIENT_VALIDITY_HOURS);
  const tbs = tbsCertificate(
    { serial: serialNumber(), issuer: issuer.name, subject: subjectName(options.subject), notBefore, notAfter, spki, extensions },
    issuer.algorithm,
  );
  return { certPem: certificatePem(signCertificate(tbs, issuer.algorithm, issuer.signingKey)), keyPem: toTalosKeyPem(keys.privateKey) };
}

const generateRsaKeyPair = (modulusLength: number) =>
  new Promise<{ privateKey: KeyObject }>((resolve, reject) =>
    generateKeyPair('rsa', { modulusLength }, (err, _publicKey, privateKey) => (err ? reject(err) : resolve({ privateKey }))),
  );

/** The Kubernetes service-account signing key: RSA 4096, PKCS#1, as upstream for current contracts. */
export async function createServiceAccountKey(): Promise<string> {
  const { privateKey } = await generateRsaKeyPair(4096);
  return toTalosKeyPem(privateKey);
}
