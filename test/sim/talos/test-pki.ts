/**
 * Test-only PKI shaped like what `talosctl gen secrets` makes: an Ed25519 OS CA (O=talos) and
 * admin client certs (O=os:admin, EKU clientAuth only). The product PKI lives in lib/talos.
 */
import 'reflect-metadata';
import { generateKeyPairSync, KeyObject, randomBytes, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { issueLeaf, issuerFacts, type IssuerFacts } from './der.ts';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const ED25519 = { name: 'Ed25519' };
const DAY_MS = 86_400_000;
const OID_SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const OID_CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

export interface TestCa {
  certPem: string;
  /** PKCS#8 under the standard `PRIVATE KEY` label. */
  keyPem: string;
  cert: x509.X509Certificate;
  privateKey: CryptoKey;
}

export interface TestKeyPair {
  certPem: string;
  keyPem: string;
}

/** 16 random bytes, positive and with no leading zero byte, so the DER INTEGER is minimal. */
function serialBytes(): Buffer {
  const b = randomBytes(16);
  b[0] = ((b[0] ?? 0) & 0x7f) | 0x01;
  return b;
}

const serial = (): string => serialBytes().toString('hex');

async function generateKeys(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(ED25519, true, ['sign', 'verify'])) as CryptoKeyPair;
}

async function exportKeyPem(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

/** Accepts upstream's non-standard `ED25519 PRIVATE KEY` label as well. */
export async function importCaKey(certPem: string, keyPem: string): Promise<TestCa> {
  const body = keyPem.replace(/-----(BEGIN|END) [A-Z0-9 ]*PRIVATE KEY-----/g, '').replace(/\s+/g, '');
  const privateKey = (await webcrypto.subtle.importKey('pkcs8', Buffer.from(body, 'base64'), ED25519, true, ['sign'])) as CryptoKey;
  return { certPem, keyPem, cert: new x509.X509Certificate(certPem), privateKey };
}

export async function createTestOsCa(opts: { organization?: string } = {}): Promise<TestCa> {
  const keys = await generateKeys();
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `O=${opts.organization ?? 'talos'}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 3650 * DAY_MS),
    keys,
    signingAlgorithm: ED25519,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([OID_SERVER_AUTH, OID_CLIENT_AUTH]),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKeyPem(keys.privateKey), cert, privateKey: keys.privateKey };
}

export interface IssueOptions {
  subject: string;
  usage: 'client' | 'server' | 'client+server';
  dnsNames?: string[];
  ips?: string[];
  validMs?: number;
  /** A key pair kept across issues (a node's identity); a fresh one when absent. */
  keys?: ServingKeys;
}

export interface ServingKeys {
  publicKey: KeyObject;
  keyPem: string;
}

/** node:crypto directly: a WebCrypto key job and its PKCS#8 export cost a simulated node more than its certificate. */
export async function generateServingKeys(): Promise<ServingKeys> {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return { publicKey, keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}

interface Signer {
  issuer: IssuerFacts;
  key: KeyObject;
}

const signers = new WeakMap<TestCa, Signer>();

/** What issuing needs from a CA, worked out once per CA object. */
function signerOf(ca: TestCa): Signer {
  let s = signers.get(ca);
  if (!s) {
    s = { issuer: issuerFacts(Buffer.from(ca.cert.rawData)), key: KeyObject.from(ca.privateKey) };
    signers.set(ca, s);
  }
  return s;
}

export async function issueCert(ca: TestCa, opts: IssueOptions): Promise<TestKeyPair> {
  const keys = opts.keys ?? (await generateServingKeys());
  const now = Date.now();
  const signer = signerOf(ca);
  const certPem = issueLeaf({
    serial: serialBytes(),
    issuer: signer.issuer,
    subject: opts.subject,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + (opts.validMs ?? 365 * DAY_MS)),
    spki: keys.publicKey.export({ type: 'spki', format: 'der' }),
    extKeyUsage: opts.usage === 'client' ? [OID_CLIENT_AUTH] : opts.usage === 'server' ? [OID_SERVER_AUTH] : [OID_SERVER_AUTH, OID_CLIENT_AUTH],
    dnsNames: opts.dnsNames ?? [],
    ips: opts.ips ?? [],
    signer: signer.key,
  });
  return { certPem, keyPem: keys.keyPem };
}

/** An admin client certificate as `talosctl gen config` issues it (roles in Subject O). */
export async function issueTestClientCert(
  ca: TestCa,
  opts: { roles?: string[]; usage?: IssueOptions['usage'] } = {},
): Promise<TestKeyPair> {
  const roles = opts.roles ?? ['os:admin'];
  const subject = roles.length > 0 ? roles.map((r) => `O=${r}`).join(', ') : 'CN=no-roles';
  return issueCert(ca, { subject, usage: opts.usage ?? 'client' });
}

/** The label siderolabs/crypto writes for Ed25519 keys (talosconfig `key`, `machine.ca.key`). */
export function toTalosKeyLabel(pem: string): string {
  return pem.replace(/-----(BEGIN|END) PRIVATE KEY-----/g, '-----$1 ED25519 PRIVATE KEY-----');
}

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');

/** A small v1alpha1 machine config (plus a HostnameConfig document) carrying the OS CA. */
export function testMachineConfig(opts: {
  ca: TestCa;
  type?: 'controlplane' | 'worker';
  hostname?: string;
  certSANs?: string[];
}): string {
  const type = opts.type ?? 'controlplane';
  const caKey = type === 'controlplane' ? b64(toTalosKeyLabel(opts.ca.keyPem)) : '""';
  const lines = [
    'version: v1alpha1',
    'debug: false',
    'machine:',
    `  type: ${type}`,
    `  token: ${randomBytes(8).toString('hex').slice(0, 6)}.${randomBytes(8).toString('hex')}`,
    '  ca:',
    `    crt: ${b64(opts.ca.certPem)}`,
    `    key: ${caKey}`,
    `  certSANs: [${(opts.certSANs ?? []).join(', ')}]`,
    '  install:',
    '    disk: /dev/sda',
    '    image: ghcr.io/siderolabs/installer:v1.13.9',
    'cluster:',
    '  clusterName: test',
    '  controlPlane:',
    '    endpoint: https://192.0.2.10:6443',
  ];
  if (opts.hostname) {
    lines.push('---', 'apiVersion: v1alpha1', 'kind: HostnameConfig', `hostname: ${opts.hostname}`);
  } else {
    lines.push('---', 'apiVersion: v1alpha1', 'kind: HostnameConfig', 'auto: stable');
  }
  return `${lines.join('\n')}\n`;
}
