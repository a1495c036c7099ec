// Builds the admin kubeconfig a suite hands to the product code, pointing at a running sim.
import { stringify } from 'yaml';
import type { TestCert } from './certs.ts';

const b64 = (pem: string): string => Buffer.from(pem, 'utf8').toString('base64');

/** `client: null` leaves the user without credentials, to test what an anonymous caller gets. */
export function kubeconfigFor(sim: { url: string; ca: { certPem: string } }, client: TestCert | null, name = 'sim'): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server: sim.url, 'certificate-authority-data': b64(sim.ca.certPem) } }],
    users: [{ name: `admin@${name}`, user: client ? { 'client-certificate-data': b64(client.certPem), 'client-key-data': b64(client.keyPem) } : { username: '' } }],
    contexts: [{ name: `admin@${name}`, context: { cluster: name, user: `admin@${name}` } }],
    'current-context': `admin@${name}`,
    preferences: {},
  });
}
