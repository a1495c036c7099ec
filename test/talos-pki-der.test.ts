// The certificates lib/talos/pki.ts builds as DER, checked against @peculiar/x509 (the encoder it
// replaced, byte for byte where the signature is deterministic), OpenSSL's strict verifier and a
// real TLS handshake. Go's crypto/x509 (Talos, kubectl) rejects what DER does not allow, so the
// comparison covers every field: serial, times, names, each extension.
import { createPublicKey, generateKeyPairSync, X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { connect, createServer } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { decodeSinglePem, encodePem } from '../lib/talos/pem.ts';
import { createCa, issueLeaf, parsePrivateKey, toNodeKeyPem, toTalosKeyPem, type CertAndKey, type IssueLeafOptions, type KeyAlgorithm } from '../lib/talos/pki.ts';
import {
  basicConstraints,
  encodeName,
  EXT_KEY_USAGE,
  extKeyUsage,
  KEY_USAGE_BIT,
  keyUsage,
  signCertificate,
  subjectKeyIdentifier,
  tbsCertificate,
} from '../lib/talos/x509-cert.ts';
import { children, namedBits, oid, readElement, time, unsignedInteger } from '../lib/talos/x509-der.ts';
import { opensslText, opensslVerify } from './support/openssl.ts';
import { peculiarCreateCa, peculiarIssueLeaf, type Fixed } from './support/peculiar-pki.ts';

const derOf = (pem: string): Buffer => decodeSinglePem(pem, ['CERTIFICATE']).der;
const tbsOf = (pem: string): Buffer => Buffer.from(children(readElement(derOf(pem)).content)[0]!.encoded);
const signatureOf = (pem: string): Buffer => Buffer.from(children(readElement(derOf(pem)).content)[2]!.content);

/** The random parts of a certificate the product made, to feed the reference encoder the same. */
function fixedOf(issued: CertAndKey): Required<Fixed> {
  const cert = new X509Certificate(issued.certPem);
  return { key: parsePrivateKey(issued.keyPem), serialHex: cert.serialNumber, notBefore: new Date(cert.validFrom), notAfter: new Date(cert.validTo) };
}

const SUBJECTS = [
  { organizations: ['os:admin'] },
  { organizations: ['system:masters'], commonName: 'admin' },
  { commonName: 'front-proxy' },
  // '_', '@', '*' and non-ASCII are outside PrintableString's alphabet: UTF8String
  { organizations: ['os:admin', 'team_a@example', 'x*'], commonName: 'Zoë (ops), 1+1=2?' },
  {},
];

describe('DER certificates match @peculiar/x509', () => {
  for (const algorithm of ['ed25519', 'ecdsa-p256'] as KeyAlgorithm[]) {
    const exact = algorithm === 'ed25519';
    it(`${algorithm}: CAs ${exact ? 'are byte-identical' : 'have identical TBSCertificates and verify'}`, async () => {
      for (const [i, subject] of SUBJECTS.entries()) {
        // the last one runs past 2049: notAfter is a GeneralizedTime
        const now = i === SUBJECTS.length - 1 ? new Date('2045-03-04T05:06:07.890Z') : undefined;
        const ca = await createCa({ algorithm, subject, ...(now ? { now } : {}) });
        const reference = await peculiarCreateCa({ algorithm, subject, ...fixedOf(ca) });
        expect(reference.keyPem).toBe(ca.keyPem);
        expect(tbsOf(ca.certPem).equals(tbsOf(reference.certPem))).toBe(true);
        if (exact) expect(ca.certPem).toBe(reference.certPem);
        const cert = new X509Certificate(ca.certPem);
        expect(cert.verify(cert.publicKey)).toBe(true);
        expect(cert.ca).toBe(true);
      }
    });

    it(`${algorithm}: client and server leaves ${exact ? 'are byte-identical' : 'have identical TBSCertificates and verify'}`, async () => {
      const ca = await createCa({ algorithm, subject: { organizations: ['talos'] } });
      const cases: Omit<IssueLeafOptions, 'ca'>[] = [
        { usage: 'client', subject: { organizations: ['os:admin'] } },
        { usage: 'client', subject: { organizations: ['system:masters'], commonName: 'admin' } },
        { usage: 'server', subject: { commonName: 'kube-apiserver' }, dnsNames: ['cp.example.test', 'localhost'], ipAddresses: ['192.0.2.1', '2001:db8::1', '::1', '10.0.0.255'] },
        { usage: 'server', subject: { commonName: 'apid' }, ipAddresses: ['127.0.0.1'] },
        { usage: 'server', subject: { organizations: ['Zoë'] }, dnsNames: ['only.dns.test'] },
        // notBefore in 2049 (UTCTime), notAfter in 2050 (GeneralizedTime)
        { usage: 'client', subject: { organizations: ['os:reader'] }, now: new Date('2049-12-31T23:00:00.999Z') },
        { usage: 'client', subject: { organizations: ['os:reader'] }, now: new Date('2051-01-01T00:00:00Z'), validityHours: 24 },
      ];
      const caCert = new X509Certificate(ca.certPem);
      for (const options of cases) {
        const leaf = await issueLeaf({ ca, ...options });
        const reference = await peculiarIssueLeaf({ ca, ...options, ...fixedOf(leaf) });
        expect(leaf.keyPem).toBe(reference.keyPem);
        expect(tbsOf(leaf.certPem).equals(tbsOf(reference.certPem))).toBe(true);
        if (exact) expect(leaf.certPem).toBe(reference.certPem);
        else expect(signatureOf(leaf.certPem).equals(signatureOf(reference.certPem))).toBe(false); // ECDSA is randomised
        const cert = new X509Certificate(leaf.certPem);
        expect(cert.verify(caCert.publicKey)).toBe(true);
        expect(cert.checkIssued(caCert)).toBe(true);
        expect(cert.checkPrivateKey(parsePrivateKey(leaf.keyPem))).toBe(true);
      }
    });
  }

  it('encodes serials as positive minimal INTEGERs, as the reference does for the same magnitude', async () => {
    const ca = await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } });
    for (const serialHex of ['ff00112233445566778899aabbccddee', '7f', '80', '00000001', '0080', '40'.repeat(20)]) {
      const reference = await peculiarIssueLeaf({ ca, usage: 'client', subject: {}, serialHex });
      const referenceSerial = children(readElement(tbsOf(reference.certPem)).content)[1]!.encoded;
      const ours = unsignedInteger(Buffer.from(serialHex, 'hex'));
      expect(ours.equals(referenceSerial)).toBe(true);
      const content = ours.subarray(2);
      // positive: top bit clear; minimal: no leading 0x00 unless the next byte needs it
      expect((content[0]! & 0x80) === 0).toBe(true);
      if (content.length > 1 && content[0] === 0) expect(content[1]! & 0x80).toBeTruthy();
    }
  });

  it('switches from UTCTime to GeneralizedTime at 2050 and drops milliseconds', () => {
    expect(time(new Date('2049-12-31T23:59:59.999Z')).toString('latin1')).toBe('\x17\x0d491231235959Z');
    expect(time(new Date('2050-01-01T00:00:00.000Z')).toString('latin1')).toBe('\x18\x0f20500101000000Z');
    expect(time(new Date('1999-01-02T03:04:05Z')).toString('latin1')).toBe('\x17\x0d990102030405Z');
    expect(() => time(new Date('1949-12-31T00:00:00Z'))).toThrow(/out of range/);
    expect(() => time(new Date(Number.NaN))).toThrow(/out of range/);
  });

  it('encodes named bits, OIDs and long lengths canonically', () => {
    expect(namedBits([0]).toString('hex')).toBe('03020780'); // digitalSignature
    expect(namedBits([5, 6, 0]).toString('hex')).toBe('03020186'); // keyCertSign | cRLSign | digitalSignature
    expect(namedBits([8]).toString('hex')).toBe('0303070080'); // decipherOnly: second byte
    expect(oid('1.2.840.10045.4.3.2').toString('hex')).toBe('06082a8648ce3d040302');
    expect(oid('2.999.3').toString('hex')).toBe('0603883703');
    expect(() => oid('1.40')).toThrow(/invalid OID/);
    // 300 + 4 (string) + 5 (OID) + 4 (SEQUENCE) + 4 (SET) = 317 = 0x13d: a two-byte long-form length
    const long = encodeName([{ type: 'CN', value: 'a'.repeat(300) }]);
    expect(long.subarray(0, 4).toString('hex')).toBe('3082013d');
    expect(readElement(long).content.length).toBe(0x13d);
  });
});

describe('DER certificates in OpenSSL and TLS', () => {
  it('pass openssl verify -x509_strict for their purpose, and openssl prints every extension', async () => {
    for (const algorithm of ['ed25519', 'ecdsa-p256'] as KeyAlgorithm[]) {
      const ca = await createCa({ algorithm, subject: { organizations: ['talos'] } });
      expect((await opensslVerify(ca.certPem, ca.certPem, ['-x509_strict'])).ok).toBe(true);
      const client = await issueLeaf({ ca, usage: 'client', subject: { organizations: ['os:admin'] } });
      const server = await issueLeaf({ ca, usage: 'server', subject: { commonName: 'apid' }, dnsNames: ['node.test'], ipAddresses: ['192.0.2.9', '2001:db8::9'] });
      expect((await opensslVerify(ca.certPem, client.certPem, ['-x509_strict', '-purpose', 'sslclient'])).ok).toBe(true);
      expect((await opensslVerify(ca.certPem, server.certPem, ['-x509_strict', '-purpose', 'sslserver'])).ok).toBe(true);
      // the EKU is exactly one purpose: a client cert is no server cert
      expect((await opensslVerify(ca.certPem, client.certPem, ['-x509_strict', '-purpose', 'sslserver'])).ok).toBe(false);
      const caText = await opensslText(ca.certPem);
      expect(caText).toMatch(/X509v3 Basic Constraints: critical\n\s+CA:TRUE\n/);
      expect(caText).toMatch(/X509v3 Key Usage: critical\n\s+Digital Signature, Certificate Sign, CRL Sign\n/);
      expect(caText).toMatch(/X509v3 Extended Key Usage: \n\s+TLS Web Server Authentication, TLS Web Client Authentication\n/);
      const text = await opensslText(server.certPem);
      expect(text).toMatch(/X509v3 Basic Constraints: critical\n\s+CA:FALSE\n/);
      expect(text).toMatch(/X509v3 Key Usage: critical\n\s+Digital Signature\n/);
      expect(text).toMatch(/X509v3 Extended Key Usage: \n\s+TLS Web Server Authentication\n/);
      expect(text).toMatch(/X509v3 Subject Alternative Name: \n\s+DNS:node\.test, IP Address:192\.0\.2\.9, IP Address:2001:DB8:0:0:0:0:0:9\n/);
      const ski = /X509v3 Subject Key Identifier: \n\s+([0-9A-F:]+)\n/.exec(caText)?.[1];
      expect(ski).toBeTruthy();
      expect(text).toContain(`X509v3 Authority Key Identifier: \n                ${ski}`);
    }
  });

  it('carries a CA key identifier that is not SHA-1 of the key into AuthorityKeyIdentifier, and issues from a CA without one', async () => {
    // Go 1.25 names new CAs by truncated SHA-256; OpenSSL only chains a leaf whose AKI matches.
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const spki = publicKey.export({ type: 'spki', format: 'der' });
    const name = encodeName([{ type: 'O', value: 'talos' }]);
    const caWith = (extensions: Buffer[]): CertAndKey => {
      const tbs = tbsCertificate(
        { serial: Buffer.from([1]), issuer: name, subject: name, notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 86_400_000), spki, extensions },
        'ed25519',
      );
      return { certPem: encodePem('CERTIFICATE', signCertificate(tbs, 'ed25519', privateKey)), keyPem: toTalosKeyPem(privateKey) };
    };
    const core = [basicConstraints(true), keyUsage([KEY_USAGE_BIT.keyCertSign, KEY_USAGE_BIT.digitalSignature]), extKeyUsage([EXT_KEY_USAGE.clientAuth])];
    const keyId = Buffer.from('0123456789abcdef0123', 'latin1');
    const named = caWith([...core, subjectKeyIdentifier(keyId)]);
    const leaf = await issueLeaf({ ca: named, usage: 'client', subject: { organizations: ['os:admin'] } });
    expect(await opensslText(leaf.certPem)).toContain(`X509v3 Authority Key Identifier: \n                ${[...keyId].map((b) => b.toString(16).toUpperCase().padStart(2, '0')).join(':')}`);
    expect((await opensslVerify(named.certPem, leaf.certPem, ['-x509_strict', '-purpose', 'sslclient'])).ok).toBe(true);

    const unnamed = caWith(core);
    const leaf2 = await issueLeaf({ ca: unnamed, usage: 'client', subject: { organizations: ['os:admin'] } });
    expect((await opensslVerify(unnamed.certPem, leaf2.certPem, ['-purpose', 'sslclient'])).ok).toBe(true);
    expect(new X509Certificate(leaf2.certPem).checkIssued(new X509Certificate(unnamed.certPem))).toBe(true);
  });

  it('refuses a CA whose key is not the certificate\'s, and SANs that are not addresses or ASCII names', async () => {
    const a = await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } });
    const b = await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } });
    await expect(issueLeaf({ ca: { certPem: a.certPem, keyPem: b.keyPem }, usage: 'client', subject: {} })).rejects.toThrow(/CA key does not match/);
    await expect(issueLeaf({ ca: a, usage: 'server', subject: {}, ipAddresses: ['300.1.1.1'] })).rejects.toThrow(/is not an IP address/);
    await expect(issueLeaf({ ca: a, usage: 'server', subject: {}, dnsNames: ['bücher.test'] })).rejects.toThrow(/not an ASCII host name/);
  });

  for (const algorithm of ['ed25519', 'ecdsa-p256'] as KeyAlgorithm[]) {
    it(`${algorithm}: a node:tls server and client authenticate each other with issued certs (mutual TLS)`, async () => {
      const ca = await createCa({ algorithm, subject: { organizations: ['talos'] } });
      const other = await createCa({ algorithm, subject: { organizations: ['talos'] } });
      const server = await issueLeaf({ ca, usage: 'server', subject: { commonName: 'apid' }, dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
      const client = await issueLeaf({ ca, usage: 'client', subject: { organizations: ['os:admin'] } });
      const tlsServer = createServer(
        { cert: server.certPem, key: toNodeKeyPem(server.keyPem), ca: ca.certPem, requestCert: true, rejectUnauthorized: true },
        (socket) => {
          const peer = socket.getPeerCertificate();
          socket.end(JSON.stringify({ o: peer.subject?.O }));
        },
      );
      tlsServer.listen(0, '127.0.0.1');
      await once(tlsServer, 'listening');
      const port = (tlsServer.address() as AddressInfo).port;
      const dial = (trust: string, servername?: string) =>
        new Promise<string>((resolve, reject) => {
          const socket = connect({ host: '127.0.0.1', port, ca: trust, cert: client.certPem, key: toNodeKeyPem(client.keyPem), ...(servername ? { servername } : {}), timeout: 5_000 });
          let body = '';
          socket.on('data', (chunk: Buffer) => (body += chunk.toString()));
          socket.on('end', () => resolve(body));
          socket.on('error', reject);
          socket.on('timeout', () => socket.destroy(new Error('timeout')));
        });
      try {
        expect(JSON.parse(await dial(ca.certPem))).toEqual({ o: 'os:admin' });
        expect(JSON.parse(await dial(ca.certPem, 'localhost'))).toEqual({ o: 'os:admin' });
        await expect(dial(other.certPem)).rejects.toThrow(/self[- ]signed|unable to (get|verify)/i);
      } finally {
        tlsServer.close();
      }
      expect(createPublicKey(server.certPem).asymmetricKeyType).toBe(algorithm === 'ed25519' ? 'ed25519' : 'ec');
    });
  }
});
