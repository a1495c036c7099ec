import { createHash, X509Certificate } from 'node:crypto';
import { readSubjectPublicKeyInfo } from '../x509-cert.ts';

export class InvalidFingerprintError extends Error {
  override name = 'InvalidFingerprintError';
}

/**
 * A certificate pin. Talos prints base64(std) of SHA-256 over the SubjectPublicKeyInfo DER
 * (siderolabs/crypto x509/fingerprint.go); hex (with or without colons, any case) is also
 * accepted, as tools like openssl print it.
 */
export interface CertificatePin {
  digest: Buffer;
}

export function parseFingerprint(text: string): CertificatePin {
  const trimmed = text.trim();
  const hex = trimmed.replace(/:/g, '');
  if (/^[0-9a-fA-F]{64}$/.test(hex) && (hex === trimmed || /^([0-9a-fA-F]{2}:){31}[0-9a-fA-F]{2}$/.test(trimmed))) {
    return { digest: Buffer.from(hex, 'hex') };
  }
  if (/^[A-Za-z0-9+/]{43}=?$/.test(trimmed)) {
    const digest = Buffer.from(trimmed, 'base64');
    if (digest.length === 32) return { digest };
  }
  throw new InvalidFingerprintError('certificate fingerprint must be a SHA-256 digest: base64 (as Talos prints it) or 64 hex digits');
}

/**
 * Over the key info's bytes as the certificate carries them, as Talos hashes them (Go's
 * RawSubjectPublicKeyInfo): for a well-formed certificate, the digest of the key parsed and
 * encoded again, without that round trip through OpenSSL at every pinned dial.
 */
export function spkiSha256(cert: Uint8Array | X509Certificate): Buffer {
  const der = cert instanceof X509Certificate ? cert.raw : Buffer.from(cert.buffer, cert.byteOffset, cert.byteLength);
  return createHash('sha256').update(readSubjectPublicKeyInfo(der)).digest();
}

/** The fingerprint Talos shows on the console for this certificate. */
export function talosFingerprint(certDer: Uint8Array): string {
  return spkiSha256(certDer).toString('base64');
}

/**
 * Matches the SPKI digest (Talos' form) or, for pins copied from `openssl x509 -fingerprint
 * -sha256`, the digest of the whole certificate. Both are pre-image resistant pins.
 */
export function certificateMatchesPin(cert: Uint8Array | X509Certificate, pin: CertificatePin): boolean {
  if (spkiSha256(cert).equals(pin.digest)) return true;
  return createHash('sha256').update(cert instanceof X509Certificate ? cert.raw : cert).digest().equals(pin.digest);
}
