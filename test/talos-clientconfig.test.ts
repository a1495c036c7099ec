import { X509Certificate, createPrivateKey } from 'node:crypto';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { kubeAdminCredentials, renderKubeconfig, renderTalosconfig, talosAdminCredentials } from '../lib/talos/clientconfig.ts';
import { generateSecrets } from '../lib/talos/secrets.ts';
import type { ClusterSecrets } from '../lib/talos/secrets.ts';
import { opensslText, opensslVerify } from './support/openssl.ts';

let secrets: ClusterSecrets;
beforeAll(async () => {
  secrets = await generateSecrets();
});

const b64 = (value: string) => Buffer.from(value, 'base64').toString('utf8');

describe('talosconfig', () => {
  it('has one context with endpoints, nodes and an os:admin cert signed by the OS CA', async () => {
    const text = await renderTalosconfig({
      clusterName: 'home',
      endpoints: ['[2001:db8::1]:50000', '192.0.2.1'],
      nodes: ['2001:db8::10'],
      secrets,
    });
    const config = parse(text) as { context: string; contexts: Record<string, { endpoints: string[]; nodes: string[]; ca: string; crt: string; key: string }> };
    expect(config.context).toBe('home');
    const ctx = config.contexts.home;
    expect(ctx?.endpoints).toEqual(['[2001:db8::1]:50000', '192.0.2.1']);
    expect(ctx?.nodes).toEqual(['2001:db8::10']);
    expect(b64(ctx?.ca ?? '')).toBe(secrets.certs.os.certPem);
    const certPem = b64(ctx?.crt ?? '');
    expect((await opensslVerify(secrets.certs.os.certPem, certPem, ['-purpose', 'sslclient'])).ok).toBe(true);
    expect((await opensslVerify(secrets.certs.k8s.certPem, certPem)).ok).toBe(false);
    expect(new X509Certificate(certPem).subject).toBe('O=os:admin');
    const keyPem = b64(ctx?.key ?? '');
    expect(keyPem.startsWith('-----BEGIN ED25519 PRIVATE KEY-----')).toBe(true); // what talosctl writes
    expect(await opensslText(certPem)).toMatch(/Not After : .*\n/);
  });

  it('rejects an empty endpoint list', async () => {
    await expect(renderTalosconfig({ clusterName: 'home', endpoints: [], secrets })).rejects.toThrow(/endpoints/);
    await expect(renderTalosconfig({ clusterName: 'home', endpoints: ['a b'], secrets })).rejects.toThrow(/endpoints\[0\]/);
  });

  it('returns Node-loadable Talos admin credentials', async () => {
    const creds = await talosAdminCredentials(secrets);
    expect(creds.caPem).toBe(secrets.certs.os.certPem);
    const key = createPrivateKey(creds.keyPem);
    expect(key.asymmetricKeyType).toBe('ed25519');
    expect(new X509Certificate(creds.certPem).checkPrivateKey(key)).toBe(true);
    expect((await opensslVerify(creds.caPem, creds.certPem)).ok).toBe(true);
  });
});

describe('kubeconfig', () => {
  it('has a system:masters admin cert signed by the Kubernetes CA', async () => {
    const text = await renderKubeconfig({ clusterName: 'home', endpoint: 'https://[2001:DB8::1]:6443', secrets });
    const config = parse(text) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(config.kind).toBe('Config');
    expect(config['current-context']).toBe('admin@home');
    expect(config.clusters[0].cluster.server).toBe('https://[2001:db8::1]:6443');
    expect(b64(config.clusters[0].cluster['certificate-authority-data'])).toBe(secrets.certs.k8s.certPem);
    const certPem = b64(config.users[0].user['client-certificate-data']);
    expect((await opensslVerify(secrets.certs.k8s.certPem, certPem, ['-purpose', 'sslclient'])).ok).toBe(true);
    expect((await opensslVerify(secrets.certs.os.certPem, certPem)).ok).toBe(false);
    expect(new X509Certificate(certPem).subject).toBe('O=system:masters\nCN=admin');
    const key = createPrivateKey(b64(config.users[0].user['client-key-data']));
    expect(new X509Certificate(certPem).checkPrivateKey(key)).toBe(true);
    expect(config.contexts[0]).toEqual({ name: 'admin@home', context: { cluster: 'home', namespace: 'default', user: 'admin@home' } });
  });

  it('rejects a non-https endpoint', async () => {
    await expect(renderKubeconfig({ clusterName: 'home', endpoint: 'http://x:6443', secrets })).rejects.toThrow(/endpoint/);
  });

  it('returns kube admin credentials', async () => {
    const creds = await kubeAdminCredentials(secrets);
    expect(creds.caPem).toBe(secrets.certs.k8s.certPem);
    expect((await opensslVerify(creds.caPem, creds.certPem)).ok).toBe(true);
    expect(createPrivateKey(creds.keyPem).asymmetricKeyType).toBe('ec');
  });
});
