import type * as x509 from '@peculiar/x509';
import { createHash, createPrivateKey, generateKeyPair, KeyObject, randomBytes, webcrypto } from 'node:crypto';
import { decodeSinglePem, encodePem } from './pem.ts';

// Loaded on first use: @peculiar/x509 and its ASN.1 stack take tens of milliseconds to evaluate,
// and most processes that import this module only relabel keys.
const loadX509 = async (): Promise<typeof x509> => (await import('./x509.ts')).x509;

const crypto = webcrypto as unknown as Crypto;
const subtle = crypto.subtle;

export type KeyAlgorithm = 'ed25519' | 'ecdsa-p256';

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

const ALGORITHMS: Record<KeyAlgorithm, { generate: EcKeyGenParams | Algorithm; sign: EcdsaParams | Algorithm }> = {
  ed25519: { generate: { name: 'Ed25519' }, sign: { name: 'Ed25519' } },
  'ecdsa-p256': { generate: { name: 'ECDSA', namedCurve: 'P-256' }, sign: { name: 'ECDSA', hash: 'SHA-256' } },
};

function serialNumber(): string {
  const bytes = randomBytes(16);
  // Positive and without a leading zero byte, so the DER INTEGER keeps all 16 bytes.
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x40;
  return bytes.toString('hex');
}

function subjectName(subject: SubjectSpec): x509.JsonName {
  const name: x509.JsonName = [];
  for (const org of subject.organizations ?? []) name.push({ O: [org] });
  if (subject.commonName) name.push({ CN: [subject.commonName] });
  return name;
}

async function generateKeys(algorithm: KeyAlgorithm): Promise<CryptoKeyPair> {
  return (await subtle.generateKey(ALGORITHMS[algorithm].generate, true, ['sign', 'verify'])) as CryptoKeyPair;
}

/** Relabels a Talos-style key PEM into one Node's crypto (and grpc-js) accepts. */
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

/** Through KeyObject.from: an exportKey job and a re-import cost more than the rest of issuing. */
function exportTalosKeyPem(key: CryptoKey): string {
  return toTalosKeyPem(KeyObject.from(key));
}

function algorithmOf(key: KeyObject): KeyAlgorithm {
  if (key.asymmetricKeyType === 'ed25519') return 'ed25519';
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return 'ecdsa-p256';
  throw new Error('CA key must be Ed25519 or ECDSA P-256');
}

async function importSigningKey(keyPem: string): Promise<{ key: CryptoKey; algorithm: KeyAlgorithm }> {
  const keyObject = parsePrivateKey(keyPem);
  const algorithm = algorithmOf(keyObject);
  const der = keyObject.export({ type: 'pkcs8', format: 'der' });
  const key = await subtle.importKey('pkcs8', der, ALGORITHMS[algorithm].generate, false, ['sign']);
  return { key, algorithm };
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
  const X509 = await loadX509();
  const keys = await generateKeys(options.algorithm);
  const cert = await X509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: serialNumber(),
      name: subjectName(options.subject),
      ...validity(options.now ?? new Date(), options.validityHours ?? CA_VALIDITY_HOURS),
      signingAlgorithm: ALGORITHMS[options.algorithm].sign,
      keys,
      extensions: [
        new X509.BasicConstraintsExtension(true, undefined, true),
        new X509.KeyUsagesExtension(
          X509.KeyUsageFlags.keyCertSign | X509.KeyUsageFlags.cRLSign | X509.KeyUsageFlags.digitalSignature,
          true,
        ),
        new X509.ExtendedKeyUsageExtension([X509.ExtendedKeyUsage.serverAuth, X509.ExtendedKeyUsage.clientAuth]),
        await X509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      ],
    },
    crypto,
  );
  return { certPem: cert.toString('pem') + '\n', keyPem: exportTalosKeyPem(keys.privateKey) };
}

interface Issuer {
  caCert: x509.X509Certificate;
  signer: { key: CryptoKey; algorithm: KeyAlgorithm };
  /** The same for every certificate the CA issues. */
  authorityKeyId: x509.AuthorityKeyIdentifierExtension;
}

const issuers = new Map<string, Promise<Issuer>>();
const MAX_ISSUERS = 64;

/**
 * A CA parsed and its key imported once per process: parsing the certificate is most of what
 * issuing costs, and a cold collect pass issues two certificates for every cluster. Keyed by a
 * digest so the map holds no key material of its own; bounded, oldest first out.
 */
function issuerOf(ca: CertAndKey): Promise<Issuer> {
  const id = createHash('sha256').update(ca.certPem).update('\0').update(ca.keyPem).digest('base64');
  let issuer = issuers.get(id);
  if (!issuer) {
    issuer = (async () => {
      const X509 = await loadX509();
      const caCert = new X509.X509Certificate(ca.certPem);
      return { caCert, signer: await importSigningKey(ca.keyPem), authorityKeyId: await X509.AuthorityKeyIdentifierExtension.create(caCert, false, crypto) };
    })();
    if (issuers.size >= MAX_ISSUERS) issuers.delete(issuers.keys().next().value!);
    issuers.set(id, issuer);
    issuer.catch(() => issuers.delete(id));
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
  const X509 = await loadX509();
  const { caCert, signer, authorityKeyId } = await issuerOf(options.ca);
  const keys = await generateKeys(signer.algorithm);
  const sans: x509.JsonGeneralName[] = [
    ...(options.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(options.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  const extensions: x509.Extension[] = [
    new X509.BasicConstraintsExtension(false, undefined, true),
    new X509.KeyUsagesExtension(X509.KeyUsageFlags.digitalSignature, true),
    new X509.ExtendedKeyUsageExtension([
      options.usage === 'client' ? X509.ExtendedKeyUsage.clientAuth : X509.ExtendedKeyUsage.serverAuth,
    ]),
    await X509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
    authorityKeyId,
  ];
  if (sans.length > 0) extensions.push(new X509.SubjectAlternativeNameExtension(sans, false));
  const cert = await X509.X509CertificateGenerator.create(
    {
      serialNumber: serialNumber(),
      subject: subjectName(options.subject),
      issuer: caCert.subject,
      ...validity(options.now ?? new Date(), options.validityHours ?? CLIENT_VALIDITY_HOURS),
      signingAlgorithm: ALGORITHMS[signer.algorithm].sign,
      publicKey: keys.publicKey,
      signingKey: signer.key,
      extensions,
    },
    crypto,
  );
  return { certPem: cert.toString('pem') + '\n', keyPem: exportTalosKeyPem(keys.privateKey) };
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
