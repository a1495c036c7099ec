// The cluster's Kubernetes CA converted for the kube sim, without vitest so benches can use it.
import 'reflect-metadata';
import { createPrivateKey, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import type { TestCa } from '../sim/kube/certs.ts';
import type { CertAndKey } from '../../lib/talos/pki.ts';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

/** The cluster's ECDSA Kubernetes CA in the shape the kube sim signs with. */
export async function kubeSimCa(ca: CertAndKey): Promise<TestCa> {
  const der = createPrivateKey(ca.keyPem).export({ format: 'der', type: 'pkcs8' });
  const key = (await webcrypto.subtle.importKey('pkcs8', der, { name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign'])) as CryptoKey;
  return { certPem: ca.certPem, keyPem: ca.keyPem, cert: new x509.X509Certificate(ca.certPem), key };
}

