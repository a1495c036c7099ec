import { X509Certificate, createPrivateKey } from 'node:crypto';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateSecrets, parseSecrets, toTalosctlSecretsBundle } from '../lib/talos/secrets.ts';
import type { ClusterSecrets } from '../lib/talos/secrets.ts';
import { opensslText, opensslVerify } from './support/openssl.ts';

let secrets: ClusterSecrets;
beforeAll(async () => {
  secrets = await generateSecrets();
});

describe('generateSecrets', () => {
  it('has the tokens and random secrets in upstream formats', () => {
    expect(secrets.bootstrapToken).toMatch(/^[a-z0-9]{6}\.[a-z0-9]{16}$/);
    expect(secrets.trustdToken).toMatch(/^[a-z0-9]{6}\.[a-z0-9]{16}$/);
    expect(secrets.bootstrapToken).not.toBe(secrets.trustdToken);
    for (const value of [secrets.cluster.secret, secrets.secretboxEncryptionSecret]) {
      expect(value).toMatch(/^[A-Za-z0-9+/]{43}=$/);
      expect(Buffer.from(value, 'base64')).toHaveLength(32);
    }
    // URL-safe alphabet with padding, as Go's base64.URLEncoding
    expect(secrets.cluster.id).toMatch(/^[A-Za-z0-9_-]{43}=$/);
    expect(Buffer.from(secrets.cluster.id, 'base64url')).toHaveLength(32);
  });

  it('makes CAs of the upstream types and subjects that each verify with openssl', async () => {
    const expected = {
      os: { subject: 'O = talos', algorithm: 'ED25519', keyType: 'ed25519' },
      k8s: { subject: 'O = kubernetes', algorithm: 'ecdsa-with-SHA256', keyType: 'ec' },
      k8sAggregator: { subject: 'CN = front-proxy', algorithm: 'ecdsa-with-SHA256', keyType: 'ec' },
      etcd: { subject: 'O = etcd', algorithm: 'ecdsa-with-SHA256', keyType: 'ec' },
    } as const;
    for (const [name, want] of Object.entries(expected)) {
      const pair = secrets.certs[name as keyof typeof expected];
      const text = await opensslText(pair.certPem);
      expect(text, name).toContain(`Subject: ${want.subject}\n`);
      expect(text, name).toContain(`Signature Algorithm: ${want.algorithm}`);
      expect(text, name).toMatch(/CA:TRUE/);
      expect((await opensslVerify(pair.certPem, pair.certPem)).ok, name).toBe(true);
      const cert = new X509Certificate(pair.certPem);
      const key = createPrivateKey(pair.keyPem.replace(/ED25519 PRIVATE KEY/g, 'PRIVATE KEY'));
      expect(key.asymmetricKeyType, name).toBe(want.keyType);
      expect(cert.checkPrivateKey(key), name).toBe(true);
    }
  });

  it('makes an RSA 4096 PKCS#1 service-account key', () => {
    const pem = secrets.certs.k8sServiceAccount.keyPem;
    expect(pem.startsWith('-----BEGIN RSA PRIVATE KEY-----\n')).toBe(true);
    expect(createPrivateKey(pem).asymmetricKeyDetails?.modulusLength).toBe(4096);
  });

  it('survives JSON and parseSecrets, and parseSecrets names a broken field', () => {
    const copy = JSON.parse(JSON.stringify(secrets)) as ClusterSecrets;
    expect(parseSecrets(copy)).toEqual(secrets);
    expect(() => parseSecrets({ ...copy, bootstrapToken: 'NOPE' })).toThrow(/bootstrapToken/);
    expect(() => parseSecrets({ ...copy, certs: { ...copy.certs, etcd: { certPem: 'x', keyPem: 'y' } } })).toThrow(
      /certs\.etcd\.certPem/,
    );
    const error = (() => {
      try {
        parseSecrets({ ...copy, trustdToken: 'secret-value-123' });
      } catch (e) {
        return (e as Error).message;
      }
      return '';
    })();
    expect(error).toMatch(/trustdToken/);
    expect(error).not.toContain('secret-value-123');
  });

  it('exports a talosctl secrets bundle with base64 PEM values', () => {
    const bundle = parse(toTalosctlSecretsBundle(secrets)) as Record<string, Record<string, unknown>>;
    const certs = bundle.certs as Record<string, { crt?: string; key: string }>;
    expect(Buffer.from(certs.os?.crt ?? '', 'base64').toString()).toBe(secrets.certs.os.certPem);
    expect(Buffer.from(certs.k8sserviceaccount?.key ?? '', 'base64').toString()).toBe(secrets.certs.k8sServiceAccount.keyPem);
    expect((bundle.trustdinfo as { token: string }).token).toBe(secrets.trustdToken);
  });

  it('gives different material on every call', async () => {
    const other = await generateSecrets();
    expect(other.cluster.id).not.toBe(secrets.cluster.id);
    expect(other.certs.os.keyPem).not.toBe(secrets.certs.os.keyPem);
    expect(other.certs.k8s.certPem).not.toBe(secrets.certs.k8s.certPem);
  });
});
