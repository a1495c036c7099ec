import { randomBytes } from 'node:crypto';
import { stringify } from 'yaml';
import { z } from 'zod';
import { pemToBase64 } from './pem.ts';
import { createCa, createServiceAccountKey } from './pki.ts';
import type { CertAndKey } from './pki.ts';

/**
 * What `talosctl gen secrets` makes, as plain JSON (PEM strings, not base64).
 * Private material throughout: the caller stores it sealed.
 */
export interface ClusterSecrets {
  format: 'rezus.talos-secrets/v1';
  cluster: { id: string; secret: string };
  bootstrapToken: string;
  secretboxEncryptionSecret: string;
  trustdToken: string;
  certs: {
    os: CertAndKey;
    k8s: CertAndKey;
    k8sAggregator: CertAndKey;
    etcd: CertAndKey;
    k8sServiceAccount: { keyPem: string };
  };
}

export const TOKEN_PATTERN = /^[a-z0-9]{6}\.[a-z0-9]{16}$/;
const TOKEN_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';
// 252 = 7 * 36: bytes at or above it are dropped so every character is equally likely.
const TOKEN_BYTE_LIMIT = 252;

function randomToken(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte >= TOKEN_BYTE_LIMIT) continue;
      out += TOKEN_ALPHABET[byte % TOKEN_ALPHABET.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/** A token of the form Kubernetes bootstrap tokens and trustd tokens share: `[a-z0-9]{6}.[a-z0-9]{16}`. */
export function generateToken(): string {
  return `${randomToken(6)}.${randomToken(16)}`;
}

// Talos v1.13 and earlier encode the cluster id with Go's base64.URLEncoding (URL-safe, padded).
function base64UrlPadded(bytes: Buffer): string {
  return bytes.toString('base64').replace(/\+/g, '-').replace(/\//g, '_');
}

export async function generateSecrets(): Promise<ClusterSecrets> {
  const [os, k8s, k8sAggregator, etcd, serviceAccountKey] = await Promise.all([
    createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } }),
    createCa({ algorithm: 'ecdsa-p256', subject: { organizations: ['kubernetes'] } }),
    createCa({ algorithm: 'ecdsa-p256', subject: { commonName: 'front-proxy' } }),
    createCa({ algorithm: 'ecdsa-p256', subject: { organizations: ['etcd'] } }),
    createServiceAccountKey(),
  ]);
  return {
    format: 'rezus.talos-secrets/v1',
    cluster: { id: base64UrlPadded(randomBytes(32)), secret: randomBytes(32).toString('base64') },
    bootstrapToken: generateToken(),
    secretboxEncryptionSecret: randomBytes(32).toString('base64'),
    trustdToken: generateToken(),
    certs: { os, k8s, k8sAggregator, etcd, k8sServiceAccount: { keyPem: serviceAccountKey } },
  };
}

const pem = (label: RegExp) => z.string().regex(label, 'must be a PEM block of the expected type');
const CERT_PEM = /^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n?$/;
const KEY_PEM = /^-----BEGIN ((ED25519|EC|RSA) )?PRIVATE KEY-----\n[\s\S]+-----END ((ED25519|EC|RSA) )?PRIVATE KEY-----\n?$/;
const base64Of32 = z
  .string()
  .refine((value) => /^[A-Za-z0-9+/_-]{43}=$/.test(value) && Buffer.from(value, 'base64').length === 32, {
    message: 'must be 32 bytes, base64',
  });
const certAndKey = z.strictObject({ certPem: pem(CERT_PEM), keyPem: pem(KEY_PEM) });

export const clusterSecretsSchema = z.strictObject({
  format: z.literal('rezus.talos-secrets/v1'),
  cluster: z.strictObject({ id: base64Of32, secret: base64Of32 }),
  bootstrapToken: z.string().regex(TOKEN_PATTERN, 'must match [a-z0-9]{6}.[a-z0-9]{16}'),
  secretboxEncryptionSecret: base64Of32,
  trustdToken: z.string().regex(TOKEN_PATTERN, 'must match [a-z0-9]{6}.[a-z0-9]{16}'),
  certs: z.strictObject({
    os: certAndKey,
    k8s: certAndKey,
    k8sAggregator: certAndKey,
    etcd: certAndKey,
    k8sServiceAccount: z.strictObject({ keyPem: pem(KEY_PEM) }),
  }),
});

/** Checks a stored secrets object. Errors name the field only, never a value. */
export function parseSecrets(json: unknown): ClusterSecrets {
  const result = clusterSecretsSchema.safeParse(json);
  if (!result.success) {
    const first = result.error.issues[0];
    const path = first?.path.join('.') || '(root)';
    throw new Error(`invalid cluster secrets: ${path}: ${first?.message ?? 'invalid'}`);
  }
  return result.data;
}

/** The same secrets in `talosctl gen secrets` YAML, for users who want to take their cluster to talosctl. */
export function toTalosctlSecretsBundle(secrets: ClusterSecrets): string {
  const pair = (p: CertAndKey) => ({ crt: pemToBase64(p.certPem), key: pemToBase64(p.keyPem) });
  return stringify(
    {
      cluster: { id: secrets.cluster.id, secret: secrets.cluster.secret },
      secrets: {
        bootstraptoken: secrets.bootstrapToken,
        secretboxencryptionsecret: secrets.secretboxEncryptionSecret,
      },
      trustdinfo: { token: secrets.trustdToken },
      certs: {
        etcd: pair(secrets.certs.etcd),
        k8s: pair(secrets.certs.k8s),
        k8saggregator: pair(secrets.certs.k8sAggregator),
        k8sserviceaccount: { key: pemToBase64(secrets.certs.k8sServiceAccount.keyPem) },
        os: pair(secrets.certs.os),
      },
    },
    { lineWidth: 0 },
  );
}
