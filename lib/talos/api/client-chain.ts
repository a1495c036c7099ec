import { X509Certificate } from 'node:crypto';
import { decodePem, encodePem } from '../pem.ts';

/** Deeper than any chain Talos issues (its client certificates come straight from the OS CA). */
const MAX_DEPTH = 4;

/**
 * The chain an mTLS client certificate is presented with: the certificate, then the certificates
 * of `ca` that issued it, up to a self-issued root. Handed the certificate alone, OpenSSL sends
 * these same certificates, but finds them at every handshake by verifying the certificate against
 * the trust store: one more Ed25519 signature check (about 0.1 ms) per node dialled, for a chain
 * that never changes. Handed the chain, it sends it as it is; the check is made here, once.
 *
 * A certificate that already carries its chain, or whose issuer is not in `ca`, is returned as it
 * is (OpenSSL then builds the chain itself, as before).
 */
export function presentedChain(cert: Buffer, ca: Buffer): Buffer {
  let issuers: X509Certificate[];
  try {
    issuers = issuersOf(cert, ca);
  } catch {
    // Unreadable PEM: left to OpenSSL, whose error names it as before.
    return cert;
  }
  if (issuers.length === 0) return cert;
  return Buffer.from(cert.toString('utf8').trimEnd() + '\n' + issuers.map((c) => encodePem('CERTIFICATE', c.raw)).join(''));
}

function issuersOf(cert: Buffer, ca: Buffer): X509Certificate[] {
  const own = decodePem(cert.toString('utf8')).filter((b) => b.label === 'CERTIFICATE');
  if (own.length !== 1) return [];
  const pool = decodePem(ca.toString('utf8')).filter((b) => b.label === 'CERTIFICATE').map((b) => new X509Certificate(b.der));
  const chain: X509Certificate[] = [];
  let current = new X509Certificate(own[0]!.der);
  while (chain.length < MAX_DEPTH) {
    // Names repeat between CAs (every Talos OS CA is O=talos) and a certificate need not name its
    // issuer's key: the signature settles it.
    const issuer = pool.find((c) => !chain.includes(c) && !c.raw.equals(current.raw) && current.checkIssued(c) && current.verify(c.publicKey));
    if (!issuer) break;
    chain.push(issuer);
    if (issuer.checkIssued(issuer)) break;
    current = issuer;
  }
  return chain;
}
