import { describe, expect, it } from 'vitest';
import { formatNodeAddress, grpcTarget, InvalidNodeAddressError, parseNodeAddress } from '../lib/talos/api/address.ts';
import { InvalidFingerprintError, parseFingerprint, talosFingerprint } from '../lib/talos/api/fingerprint.ts';
import { createHash, createPrivateKey, generateKeyPairSync, X509Certificate } from 'node:crypto';
import { createCa, toNodeKeyPem } from '../lib/talos/pki.ts';
import { encodeName, signCertificate, tbsCertificate } from '../lib/talos/x509-cert.ts';
import { children, readElement, sequence } from '../lib/talos/x509-der.ts';

describe('parseNodeAddress', () => {
  it.each([
    ['2001:db8::10', { host: '2001:db8::10', port: 50000 }],
    ['[2001:db8::10]:50123', { host: '2001:db8::10', port: 50123 }],
    ['[2001:db8::10]', { host: '2001:db8::10', port: 50000 }],
    ['192.0.2.5', { host: '192.0.2.5', port: 50000 }],
    ['192.0.2.5:50123', { host: '192.0.2.5', port: 50123 }],
    ['node-1.example.net', { host: 'node-1.example.net', port: 50000 }],
    ['Node-1.Example.net:443', { host: 'node-1.example.net', port: 443 }],
    ['  192.0.2.5  ', { host: '192.0.2.5', port: 50000 }],
  ])('parses %s', (input, expected) => {
    expect(parseNodeAddress(input)).toEqual(expected);
  });

  it.each([
    '',
    '   ',
    '192.0.2.5:',
    '192.0.2.5:0',
    '192.0.2.5:65536',
    '192.0.2.5:abc',
    '300.1.2.3',
    '1.2.3',
    '2001:db8::10:50000:zz',
    '[2001:db8::10',
    '[192.0.2.5]:50000',
    '[2001:db8::10]50000',
    'https://192.0.2.5',
    'user@host',
    'host name',
    '-bad.example',
    'a..b',
  ])('rejects %j with a clear error', (input) => {
    expect(() => parseNodeAddress(input)).toThrow(InvalidNodeAddressError);
  });

  it('quotes the bad input in the message', () => {
    expect(() => parseNodeAddress('192.0.2.5:99999')).toThrow(/"192\.0\.2\.5:99999".*port out of range/);
  });

  it('builds the grpc target with IPv6 bracketed', () => {
    expect(grpcTarget('2001:db8::10')).toBe('[2001:db8::10]:50000');
    expect(grpcTarget('[2001:db8::10]:50123')).toBe('[2001:db8::10]:50123');
    expect(grpcTarget('192.0.2.5')).toBe('192.0.2.5:50000');
    expect(formatNodeAddress({ host: 'cp1.example', port: 50001 })).toBe('cp1.example:50001');
  });
});

describe('parseFingerprint', () => {
  const digest = Buffer.alloc(32, 0xab);
  it('accepts base64 as Talos prints it, and hex with or without colons in any case', () => {
    for (const form of [
      digest.toString('base64'),
      digest.toString('hex'),
      digest.toString('hex').toUpperCase(),
      digest.toString('hex').match(/../g)!.join(':'),
      digest.toString('hex').toUpperCase().match(/../g)!.join(':'),
    ]) {
      expect(parseFingerprint(form).digest.equals(digest)).toBe(true);
    }
  });

  it.each(['', 'abcd', 'zz'.repeat(32), 'ab:cd'.repeat(10), Buffer.alloc(16).toString('base64')])('rejects %j', (bad) => {
    expect(() => parseFingerprint(bad)).toThrow(InvalidFingerprintError);
  });
});

describe('talosFingerprint', () => {
  // Computed apart from the product's DER reading: Node parses the key and encodes it again.
  const reencoded = (cert: X509Certificate) => createHash('sha256').update(cert.publicKey.export({ type: 'spki', format: 'der' })).digest('base64');

  it("is SHA-256 over the certificate's key info, for Ed25519, ECDSA P-256 and RSA keys, in v3 and v1 certificates", async () => {
    const ed = await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } });
    const ec = await createCa({ algorithm: 'ecdsa-p256', subject: { organizations: ['kubernetes'] } });
    // A v1 certificate has no version field, so every field after it sits one place earlier;
    // its key here is RSA, whose key info carries parameters (NULL) the other two do not.
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'der' });
    const name = encodeName([{ type: 'CN', value: 'v1' }]);
    const v3 = tbsCertificate({ serial: Buffer.from([7]), issuer: name, subject: name, notBefore: new Date(), notAfter: new Date(Date.now() + 3_600_000), spki: rsa, extensions: [] }, 'ed25519');
    const [version, ...rest] = children(readElement(v3).content);
    expect(version!.tag).toBe(0xa0);
    const v1 = signCertificate(sequence(...rest.slice(0, -1).map((f) => f.encoded)), 'ed25519', createPrivateKey(toNodeKeyPem(ed.keyPem)));

    const certs = [new X509Certificate(ed.certPem), new X509Certificate(ec.certPem), new X509Certificate(v1)];
    expect(certs.map((c) => c.publicKey.asymmetricKeyType)).toEqual(['ed25519', 'ec', 'rsa']);
    expect(certs[2]!.toLegacyObject().subject).toEqual({ CN: 'v1' });
    for (const cert of certs) expect(talosFingerprint(cert.raw)).toBe(reencoded(cert));
    expect(new Set(certs.map((c) => talosFingerprint(c.raw))).size).toBe(3);
  });

  it('takes the certificate from inside a larger buffer', async () => {
    const ed = await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } });
    const cert = new X509Certificate(ed.certPem);
    const padded = Buffer.concat([Buffer.alloc(5, 0x30), cert.raw, Buffer.alloc(3)]);
    expect(talosFingerprint(padded.subarray(5, 5 + cert.raw.length))).toBe(reencoded(cert));
  });
});
