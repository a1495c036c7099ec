// Test-only PKI for the simulated Kubernetes API server: an ECDSA P-256 cluster CA, server
// certificates for loopback, and client certificates whose subject O is the Kubernetes group.
// The product PKI lives elsewhere; this exists so the suites can mint what they need quickly.
import { createPrivateKey, webcrypto } from 'node:crypto';
// @peculiar/x509 2.x resolves its ASN.1 codecs through tsyringe, which needs the Reflect metadata API.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGN = { name: 'ECDSA', hash: 'SHA-256' } as const;
const DAY = 24 * 3600 * 1000;

export interface TestCa {
  certPem: string;
  keyPem: string;
  /** Kept so further certificates can be signed without re-importing the key. */
  cert: x509.X509Certificate;
  key: CryptoKey;
}

export interface TestCert {
  certPem: string;
  keyPem: string;
}

async function keyPair(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as CryptoKeyPair;
}

async function privateKeyPem(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  const b64 = der.toString('base64').replace(/(.{64})/g, '$1\n').trimEnd();
  return `-----BEGIN PRIVATE KEY-----\n${b64}\n-----END PRIVATE KEY-----\n`;
}

function validity(): { notBefore: Date; notAfter: Date } {
  const now = Date.now();
  // Back-dated a little so clock granularity never makes a fresh cert "not yet valid".
  return { notBefore: new Date(now - 60_000), notAfter: new Date(now + DAY) };
}

export async function createTestCa(commonName = 'kubernetes'): Promise<TestCa> {
  const keys = await keyPair();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${commonName}`,
    keys,
    signingAlgorithm: SIGN,
    ...validity(),
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await privateKeyPem(keys.privateKey), cert, key: keys.privateKey };
}

async function issue(ca: TestCa, subject: string, extensions: x509.Extension[]): Promise<TestCert> {
  const keys = await keyPair();
  const cert = await x509.X509CertificateGenerator.create({
    subject,
    issuer: ca.cert.subject,
    publicKey: keys.publicKey,
    signingKey: ca.key,
    signingAlgorithm: SIGN,
    ...validity(),
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      await x509.AuthorityKeyIdentifierExtension.create(ca.cert, false),
      ...extensions,
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await privateKeyPem(keys.privateKey) };
}

/** Server certificate valid for the loopback names the simulator listens on. */
export async function issueServerCert(ca: TestCa): Promise<TestCert> {
  return issue(ca, 'CN=kube-apiserver', [
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
    new x509.SubjectAlternativeNameExtension([
      { type: 'ip', value: '127.0.0.1' },
      { type: 'ip', value: '::1' },
      { type: 'dns', value: 'localhost' },
      { type: 'dns', value: 'kubernetes' },
    ]),
  ]);
}

/** Client certificate; Kubernetes reads the user from CN and the groups from O. */
export async function issueClientCert(ca: TestCa, opts: { cn?: string; org?: string } = {}): Promise<TestCert> {
  const cn = opts.cn ?? 'admin';
  const org = opts.org ?? 'system:masters';
  return issue(ca, `CN=${cn}, O=${org}`, [
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
  ]);
}

/** Uses an existing ECDSA P-256 CA (e.g. a cluster's Kubernetes CA, key in SEC1 or PKCS#8 PEM) to run the sim. */
export async function importTestCa(certPem: string, keyPem: string): Promise<TestCa> {
  const der = createPrivateKey(keyPem).export({ format: 'der', type: 'pkcs8' });
  const key = (await webcrypto.subtle.importKey('pkcs8', der, EC, true, ['sign'])) as CryptoKey;
  return { certPem, keyPem, cert: new x509.X509Certificate(certPem), key };
}
