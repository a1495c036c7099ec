import * as tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { parseSimConfig, SimConfigError } from './sim/talos/sim-config.ts';
import { createTestOsCa, issueTestClientCert, testMachineConfig } from './sim/talos/index.ts';
import { configuredNode, type ConfiguredFixture } from './talos-api-helpers.ts';

const fixtures: ConfiguredFixture[] = [];

afterEach(async () => {
  for (const f of fixtures.splice(0)) {
    f.client.close();
    await f.sim.stop();
  }
});

/** The certificate apid serves now, read from a handshake with a client cert from `ca`. */
async function servedCert(f: ConfiguredFixture, client = f.admin): Promise<X509Certificate> {
  const port = Number(f.sim.address.split(':').at(-1));
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, cert: client.certPem, key: client.keyPem, rejectUnauthorized: false, ALPNProtocols: ['h2'] }, () => {
      const cert = s.getPeerX509Certificate();
      s.destroy();
      if (cert) resolve(cert);
      else reject(new Error('no peer certificate'));
    });
    s.on('error', reject);
  });
}

async function rebootInto(f: ConfiguredFixture, config: string): Promise<void> {
  await f.client.applyConfiguration({ data: Buffer.from(config), mode: 'reboot' });
  await f.sim.waitForPhase('down');
  await f.sim.waitForPhase('configured');
}

describe('sim apid identity', () => {
  it('keeps its key across reboots and re-signs only when the hostname or the CA changes', async () => {
    const f = await configuredNode({ hostname: 'cp-1', rebootMs: 20 });
    fixtures.push(f);
    const first = await servedCert(f);
    expect(first.checkIssued(new X509Certificate(f.ca.certPem))).toBe(true);
    expect(first.subjectAltName).toContain('DNS:cp-1');

    await rebootInto(f, testMachineConfig({ ca: f.ca, hostname: 'cp-1' }));
    const same = await servedCert(f);
    expect(same.fingerprint256).toBe(first.fingerprint256);

    await rebootInto(f, testMachineConfig({ ca: f.ca, hostname: 'cp-2' }));
    const renamed = await servedCert(f);
    expect(renamed.fingerprint256).not.toBe(first.fingerprint256);
    expect(renamed.subjectAltName).toContain('DNS:cp-2');
    expect(renamed.subjectAltName).not.toContain('DNS:cp-1');
    expect(renamed.publicKey.export({ format: 'der', type: 'spki' })).toEqual(first.publicKey.export({ format: 'der', type: 'spki' }));

    // A new OS CA: the node is now trusted only through it, still with the same key.
    const ca2 = await createTestOsCa();
    await rebootInto(f, testMachineConfig({ ca: ca2, hostname: 'cp-2' }));
    const admin2 = await issueTestClientCert(ca2);
    const moved = await servedCert(f, admin2);
    expect(moved.checkIssued(new X509Certificate(ca2.certPem))).toBe(true);
    expect(moved.verify(new X509Certificate(ca2.certPem).publicKey)).toBe(true);
    expect(moved.publicKey.export({ format: 'der', type: 'spki' })).toEqual(first.publicKey.export({ format: 'der', type: 'spki' }));
  });
});

describe('sim config parsing', () => {
  it('rejects bytes that are not YAML without quoting them', () => {
    const bad = Buffer.from('machine:\n  token: secret-abc123\n  ca: [unclosed\n');
    let err: unknown;
    try {
      parseSimConfig(bad);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SimConfigError);
    expect((err as Error).message).toMatch(/^failed to parse config/);
    expect((err as Error).message).not.toContain('secret-abc123');
    // The second time comes from the cache and fails the same way.
    expect(() => parseSimConfig(bad)).toThrow(SimConfigError);
  });

  it('reads the fields the sim needs and hands out a result callers cannot change', async () => {
    const ca = await createTestOsCa();
    const parsed = parseSimConfig(Buffer.from(testMachineConfig({ ca, hostname: 'n1', certSANs: ['10.0.0.5', 'api.example'] }))).v1alpha1!;
    expect(parsed.type).toBe('controlplane');
    expect(parsed.hostname).toBe('n1');
    expect(parsed.caCertPem).toBe(ca.certPem);
    expect(parsed.certSANs).toEqual(['10.0.0.5', 'api.example']);
    expect(Object.isFrozen(parsed) && Object.isFrozen(parsed.certSANs)).toBe(true);
    expect(() => parseSimConfig(Buffer.from('version: v1alpha1\nmachine: {}\n---\nversion: v1alpha1\ncluster: {}\n'))).toThrow(/duplicate v1alpha1/);
  });
});
