import { X509Certificate, createPrivateKey, createPublicKey } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodePem, encodePem } from '../lib/talos/pem.ts';
import { createCa, issueLeaf, toNodeKeyPem } from '../lib/talos/pki.ts';
import { opensslText, opensslVerify } from './support/openssl.ts';

describe('talos pki', () => {
  it('round-trips PEM blocks', () => {
    const der = Buffer.from(Array.from({ length: 100 }, (_, i) => i));
    const pem = encodePem('TEST BLOCK', der);
    expect(pem.split('\n').every((line) => line.length <= 64)).toBe(true);
    const [block] = decodePem(pem + encodePem('OTHER', Buffer.from([1])));
    expect(block?.label).toBe('TEST BLOCK');
    expect(block?.der.equals(der)).toBe(true);
    expect(decodePem(pem + encodePem('OTHER', Buffer.from([1])))).toHaveLength(2);
  });

  it('issues from several CAs in turn, each leaf signed by its own CA (the parsed issuer is kept per CA)', async () => {
    const a = await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } });
    const b = await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } });
    const k = await createCa({ algorithm: 'ecdsa-p256', subject: { organizations: ['kubernetes'] } });
    for (const [ca, other] of [[a, b], [b, a], [a, k], [k, a]] as const) {
      const leaf = new X509Certificate((await issueLeaf({ ca, usage: 'client', subject: { organizations: ['os:admin'] } })).certPem);
      expect(leaf.verify(new X509Certificate(ca.certPem).publicKey)).toBe(true);
      expect(leaf.verify(new X509Certificate(other.certPem).publicKey)).toBe(false);
      expect(leaf.checkIssued(new X509Certificate(ca.certPem))).toBe(true);
    }
  });

  it('makes an Ed25519 CA whose key uses the Talos label and Node can load after relabelling', async () => {
    const ca = await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } });
    expect(ca.keyPem.startsWith('-----BEGIN ED25519 PRIVATE KEY-----\n')).toBe(true);
    expect(() => createPrivateKey(ca.keyPem)).toThrow();
    const key = createPrivateKey(toNodeKeyPem(ca.keyPem));
    expect(key.asymmetricKeyType).toBe('ed25519');
    const cert = new X509Certificate(ca.certPem);
    expect(cert.ca).toBe(true);
    expect(cert.subject).toBe('O=talos');
    expect(cert.checkPrivateKey(key)).toBe(true);
    const years = (Date.parse(cert.validTo) - Date.parse(cert.validFrom)) / (365 * 86_400_000);
    expect(years).toBeGreaterThan(9.99);
    expect(years).toBeLessThan(10.01);
    const text = await opensslText(ca.certPem);
    expect(text).toMatch(/Certificate Sign, CRL Sign/);
    expect(text).toMatch(/CA:TRUE/);
    expect((await opensslVerify(ca.certPem, ca.certPem)).ok).toBe(true);
  });

  it('makes an ECDSA P-256 CA with a SEC1 key', async () => {
    const ca = await createCa({ algorithm: 'ecdsa-p256', subject: { commonName: 'front-proxy' } });
    expect(ca.keyPem.startsWith('-----BEGIN EC PRIVATE KEY-----\n')).toBe(true);
    const key = createPrivateKey(ca.keyPem);
    expect(key.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    const text = await opensslText(ca.certPem);
    expect(text).toMatch(/ecdsa-with-SHA256/);
    expect(text).toMatch(/Subject: CN = front-proxy/);
  });

  it('issues client certs that verify against their CA and not against another', async () => {
    const ca = await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } });
    const other = await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } });
    const leaf = await issueLeaf({ ca, usage: 'client', subject: { organizations: ['os:admin'] } });
    expect((await opensslVerify(ca.certPem, leaf.certPem, ['-purpose', 'sslclient'])).ok).toBe(true);
    expect((await opensslVerify(other.certPem, leaf.certPem)).ok).toBe(false);
    const cert = new X509Certificate(leaf.certPem);
    expect(cert.ca).toBe(false);
    expect(cert.subject).toBe('O=os:admin');
    expect(cert.checkPrivateKey(createPrivateKey(toNodeKeyPem(leaf.keyPem)))).toBe(true);
    const text = await opensslText(leaf.certPem);
    // apid accepts only ExtKeyUsage exactly [ClientAuth]
    expect(text).toMatch(/X509v3 Extended Key Usage: \n\s+TLS Web Client Authentication\n/);
  });

  it('issues server certs with DNS, IPv4 and IPv6 SANs', async () => {
    const ca = await createCa({ algorithm: 'ecdsa-p256', subject: { organizations: ['kubernetes'] } });
    const leaf = await issueLeaf({
      ca,
      usage: 'server',
      subject: { commonName: 'kube-apiserver' },
      dnsNames: ['cp.example.test'],
      ipAddresses: ['192.0.2.1', '2001:db8::1'],
    });
    const cert = new X509Certificate(leaf.certPem);
    expect(cert.subjectAltName).toContain('DNS:cp.example.test');
    expect(cert.subjectAltName).toContain('IP Address:192.0.2.1');
    expect(cert.subjectAltName).toContain('IP Address:2001:DB8:0:0:0:0:0:1');
    expect(cert.checkIssued(new X509Certificate(ca.certPem))).toBe(true);
    expect(cert.verify(createPublicKey(ca.certPem))).toBe(true);
    expect((await opensslVerify(ca.certPem, leaf.certPem, ['-purpose', 'sslserver'])).ok).toBe(true);
    expect(createPrivateKey(leaf.keyPem).asymmetricKeyType).toBe('ec');
  });
});
