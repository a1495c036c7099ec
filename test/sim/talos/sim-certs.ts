import { X509Certificate } from 'node:crypto';
import { talosFingerprint } from '../../../lib/talos/api/fingerprint.ts';
import { createTestOsCa, importCaKey, issueCert, type TestKeyPair } from './test-pki.ts';

export interface MaintenanceCert extends TestKeyPair {
  /** base64 SHA-256 of the SPKI, as a Talos console prints it. */
  fingerprint: string;
}

async function mintMaintenanceCert(): Promise<MaintenanceCert> {
  // Upstream signs it with an ephemeral self-signed maintenance CA (Ed25519).
  const ca = await createTestOsCa({ organization: 'maintenance' });
  const pair = await issueCert(ca, {
    subject: 'CN=maintenance-service.talos.dev',
    usage: 'server',
    dnsNames: ['localhost'],
    ips: ['127.0.0.1', '::1'],
    validMs: 86_400_000,
  });
  return { ...pair, fingerprint: talosFingerprint(new X509Certificate(pair.certPem).raw) };
}

let shared: Promise<MaintenanceCert> | undefined;

/** One maintenance certificate per process keeps hundreds of sims cheap to start. */
export function sharedMaintenanceCert(): Promise<MaintenanceCert> {
  shared ??= mintMaintenanceCert();
  return shared;
}

export function uniqueMaintenanceCert(): Promise<MaintenanceCert> {
  return mintMaintenanceCert();
}

/** apid's server certificate: issued from the OS CA, 24 h, node IPs and hostname in the SANs. */
export async function mintApidCert(caCertPem: string, caKeyPem: string, hostname: string, extraSans: string[]): Promise<TestKeyPair> {
  const ca = await importCaKey(caCertPem, caKeyPem);
  const ips = new Set(['127.0.0.1', '::1']);
  const dns = new Set([hostname]);
  for (const san of extraSans) {
    if (/^[0-9.]+$/.test(san) || san.includes(':')) ips.add(san);
    else dns.add(san);
  }
  return issueCert(ca, { subject: `CN=${hostname}`, usage: 'server', ips: [...ips], dnsNames: [...dns], validMs: 86_400_000 });
}
