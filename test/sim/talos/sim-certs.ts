import { X509Certificate } from 'node:crypto';
import { talosFingerprint } from '../../../lib/talos/api/fingerprint.ts';
import { createTestOsCa, generateServingKeys, importCaKey, issueCert, type ServingKeys, type TestCa, type TestKeyPair } from './test-pki.ts';

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

const importedCas = new Map<string, Promise<TestCa>>();

/**
 * Every node of a cluster carries the same OS CA, so a process imports it once; bounded because
 * a long test run sees many clusters. A failed import is not kept.
 */
function cachedCa(caCertPem: string, caKeyPem: string): Promise<TestCa> {
  const key = `${caCertPem}\n${caKeyPem}`;
  let ca = importedCas.get(key);
  if (!ca) {
    if (importedCas.size >= 64) importedCas.delete(importedCas.keys().next().value!);
    ca = importCaKey(caCertPem, caKeyPem);
    importedCas.set(key, ca);
    ca.catch(() => importedCas.delete(key));
  }
  return ca;
}

function apidSans(hostname: string, extraSans: string[]): { ips: string[]; dnsNames: string[] } {
  const ips = new Set(['127.0.0.1', '::1']);
  const dns = new Set([hostname]);
  for (const san of extraSans) {
    if (/^[0-9.]+$/.test(san) || san.includes(':')) ips.add(san);
    else dns.add(san);
  }
  return { ips: [...ips], dnsNames: [...dns] };
}

/** apid's server certificate: issued from the OS CA, 24 h, node IPs and hostname in the SANs. */
export async function mintApidCert(caCertPem: string, caKeyPem: string, hostname: string, extraSans: string[], keys?: ServingKeys): Promise<TestKeyPair> {
  const ca = await cachedCa(caCertPem, caKeyPem);
  return issueCert(ca, { subject: `CN=${hostname}`, usage: 'server', ...apidSans(hostname, extraSans), validMs: 86_400_000, ...(keys ? { keys } : {}) });
}

/**
 * A node's apid identity: one key pair for the node's life (a real node keeps its machine
 * identity across reboots), and the certificate re-signed only when the issuing CA, the hostname
 * or the addresses change. Key generation and signing dominate a simulated reboot otherwise.
 */
export class ApidIdentity {
  private keys: Promise<ServingKeys> | undefined;
  private last: { key: string; pair: Promise<TestKeyPair> } | undefined;

  cert(caCertPem: string, caKeyPem: string, hostname: string, extraSans: string[]): Promise<TestKeyPair> {
    const key = JSON.stringify([caCertPem, caKeyPem, hostname, extraSans]);
    if (this.last?.key === key) return this.last.pair;
    this.keys ??= generateServingKeys();
    const keys = this.keys;
    const pair = keys.then((k) => mintApidCert(caCertPem, caKeyPem, hostname, extraSans, k));
    const entry = { key, pair };
    this.last = entry;
    pair.catch(() => {
      if (this.last === entry) this.last = undefined;
    });
    return pair;
  }
}
