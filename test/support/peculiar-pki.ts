// The certificate issuance lib/talos/pki.ts did through @peculiar/x509 before it built DER itself,
// kept as the reference its output is compared against (byte for byte where signatures are
// deterministic) and as the bench's baseline. Every input that is random in the product (key pair,
// serial, validity) can be given, so both encoders can be fed the same ones. Test and bench only.
import 'reflect-metadata';
import { createPublicKey, KeyObject, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { parsePrivateKey, toTalosKeyPem, type CertAndKey, type IssueLeafOptions, type KeyAlgorithm, type SubjectSpec } from '../../lib/talos/pki.ts';

const crypto = webcrypto as unknown as Crypto;
x509.cryptoProvider.set(crypto);

const ALGORITHMS: Record<KeyAlgorithm, { generate: EcKeyGenParams | Algorithm; sign: EcdsaParams | Algorithm }> = {
  ed25519: { generate: { name: 'Ed25519' }, sign: { name: 'Ed25519' } },
  'ecdsa-p256': { generate: { name: 'ECDSA', namedCurve: 'P-256' }, sign: { name: 'ECDSA', hash: 'SHA-256' } },
};

/** The random parts, fixed by the caller when comparing encoders. */
export interface Fixed {
  /** the private key (Node KeyObject); its public half goes into the certificate */
  key?: KeyObject;
  /** hex, as @peculiar/x509 takes it */
  serialHex?: string;
  notBefore?: Date;
  notAfter?: Date;
}

const HOUR_MS = 3_600_000;

function subjectName(subject: SubjectSpec): x509.JsonName {
  const name: x509.JsonName = [];
  for (const org of subject.organizations ?? []) name.push({ O: [org] });
  if (subject.commonName) name.push({ CN: [subject.commonName] });
  return name;
}

async function webKeys(algorithm: KeyAlgorithm, key: KeyObject | undefined): Promise<CryptoKeyPair> {
  if (!key) return (await crypto.subtle.generateKey(ALGORITHMS[algorithm].generate, true, ['sign', 'verify'])) as CryptoKeyPair;
  const params = ALGORITHMS[algorithm].generate;
  return {
    privateKey: await crypto.subtle.importKey('pkcs8', key.export({ type: 'pkcs8', format: 'der' }), params, true, ['sign']),
    publicKey: await crypto.subtle.importKey('spki', createPublicKey(key).export({ type: 'spki', format: 'der' }), params, true, ['verify']),
  };
}

function randomSerial(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x40;
  return Buffer.from(bytes).toString('hex');
}

export interface PeculiarCaOptions extends Fixed {
  algorithm: KeyAlgorithm;
  subject: SubjectSpec;
  validityHours?: number;
}

export async function peculiarCreateCa(options: PeculiarCaOptions): Promise<CertAndKey> {
  const keys = await webKeys(options.algorithm, options.key);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: options.serialHex ?? randomSerial(),
      name: subjectName(options.subject),
      notBefore: options.notBefore ?? new Date(now - 5 * 60_000),
      notAfter: options.notAfter ?? new Date(now + (options.validityHours ?? 87_600) * HOUR_MS),
      signingAlgorithm: ALGORITHMS[options.algorithm].sign,
      keys,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      ],
    },
    crypto,
  );
  return { certPem: cert.toString('pem') + '\n', keyPem: toTalosKeyPem(KeyObject.from(keys.privateKey)) };
}

/** issueLeaf's options, with every random or clock-given input fixed instead of `now`. */
export type PeculiarLeafOptions = Omit<IssueLeafOptions, 'now'> & Fixed;

/** The old issueLeaf, without its per-CA cache: the CA is parsed and its key imported every call. */
export async function peculiarIssueLeaf(options: PeculiarLeafOptions): Promise<CertAndKey> {
  const caCert = new x509.X509Certificate(options.ca.certPem);
  const caKey = parsePrivateKey(options.ca.keyPem);
  const algorithm: KeyAlgorithm = caKey.asymmetricKeyType === 'ed25519' ? 'ed25519' : 'ecdsa-p256';
  const signingKey = await crypto.subtle.importKey('pkcs8', caKey.export({ type: 'pkcs8', format: 'der' }), ALGORITHMS[algorithm].generate, false, ['sign']);
  const keys = await webKeys(algorithm, options.key);
  const sans: x509.JsonGeneralName[] = [
    ...(options.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(options.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    new x509.ExtendedKeyUsageExtension([options.usage === 'client' ? x509.ExtendedKeyUsage.clientAuth : x509.ExtendedKeyUsage.serverAuth]),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
    await x509.AuthorityKeyIdentifierExtension.create(caCert, false, crypto),
  ];
  if (sans.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(sans, false));
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: options.serialHex ?? randomSerial(),
      subject: subjectName(options.subject),
      issuer: caCert.subject,
      notBefore: options.notBefore ?? new Date(now - 5 * 60_000),
      notAfter: options.notAfter ?? new Date(now + (options.validityHours ?? 8_760) * HOUR_MS),
      signingAlgorithm: ALGORITHMS[algorithm].sign,
      publicKey: keys.publicKey,
      signingKey,
      extensions,
    },
    crypto,
  );
  return { certPem: cert.toString('pem') + '\n', keyPem: toTalosKeyPem(KeyObject.from(keys.privateKey)) };
}
