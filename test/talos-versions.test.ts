import { describe, expect, it } from 'vitest';
import { installerImage, VANILLA_SCHEMATIC } from '../lib/talos/installer.ts';
import { cidrsOverlap, canonicalIp, parseCidr } from '../lib/talos/net.ts';
import { validateConfigDocuments } from '../lib/talos/schema.ts';
import { endpointSchema, installDiskSchema, subnetsSchema, zodIssues } from '../lib/talos/validate.ts';
import {
  compareVersions,
  DEFAULT_KUBERNETES_VERSION,
  DEFAULT_TALOS_VERSION,
  normalizeKubernetesVersion,
  normalizeTalosVersion,
} from '../lib/talos/versions.ts';

describe('versions', () => {
  it('normalises Talos and Kubernetes versions', () => {
    expect(DEFAULT_TALOS_VERSION).toBe('v1.13.9');
    expect(DEFAULT_KUBERNETES_VERSION).toBe('1.36.3');
    expect(normalizeTalosVersion('1.13.9')).toBe('v1.13.9');
    expect(normalizeTalosVersion('v1.14.0-rc.1')).toBe('v1.14.0-rc.1');
    expect(normalizeKubernetesVersion('v1.36.3')).toBe('1.36.3');
    for (const bad of ['1.13', 'v1.13.9.1', 'latest', '01.2.3', 'v1.14.0-', 'v1.2.3-01']) {
      expect(() => normalizeTalosVersion(bad), bad).toThrow(/talosVersion/);
    }
    expect(() => normalizeKubernetesVersion('1.36')).toThrow(/kubernetesVersion/);
  });

  it('orders versions by semver precedence', () => {
    const sorted = ['v1.14.0', 'v1.13.10', 'v1.14.0-rc.1', '1.13.9', 'v1.14.0-beta.0', 'v1.14.0-rc.10', 'v1.14.0-rc.2'].sort(compareVersions);
    expect(sorted).toEqual(['1.13.9', 'v1.13.10', 'v1.14.0-beta.0', 'v1.14.0-rc.1', 'v1.14.0-rc.2', 'v1.14.0-rc.10', 'v1.14.0']);
    expect(compareVersions('v1.13.9', '1.13.9')).toBe(0);
    expect(() => compareVersions('x', 'v1.0.0')).toThrow();
  });
});

describe('installer image', () => {
  it('builds factory references', () => {
    expect(installerImage(VANILLA_SCHEMATIC, '1.13.9')).toBe(
      'factory.talos.dev/installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.13.9',
    );
    expect(installerImage(VANILLA_SCHEMATIC, 'v1.13.9', { platform: 'aws', secureboot: true })).toBe(
      `factory.talos.dev/aws-installer-secureboot/${VANILLA_SCHEMATIC}:v1.13.9`,
    );
    expect(() => installerImage('abc', 'v1.13.9')).toThrow(/schematic/);
    expect(() => installerImage(VANILLA_SCHEMATIC, 'v1.13.9', { platform: 'AWS/x' })).toThrow(/platform/);
  });
});

describe('edge validators', () => {
  it('accepts https endpoints with a port, IPv6 in brackets', () => {
    expect(endpointSchema.parse('https://CP.example.test:6443/')).toBe('https://cp.example.test:6443');
    expect(endpointSchema.parse('https://[2001:db8:0::1]:6443')).toBe('https://[2001:db8::1]:6443');
    for (const bad of ['https://cp.example.test', 'http://cp:6443', 'https://cp:6443/path', 'https://cp:99999', 'https://[192.0.2.1]:6443', 'https://user@cp:6443']) {
      const result = endpointSchema.safeParse(bad);
      expect(result.success, bad).toBe(false);
    }
  });

  it('checks install disks and subnets, naming the field', () => {
    expect(installDiskSchema.safeParse('/dev/disk/by-id/nvme-x').success).toBe(true);
    expect(installDiskSchema.safeParse('/dev/../etc').success).toBe(false);
    const overlap = subnetsSchema.safeParse({ podSubnets: ['fd00::/48'], serviceSubnets: ['10.96.0.0/12', 'fd00:0:0:1::/64'] });
    expect(overlap.success).toBe(false);
    if (!overlap.success) expect(zodIssues(overlap.error, 'network')).toEqual([{ path: 'network.serviceSubnets.1', message: 'overlaps a pod subnet' }]);
    const twoV4 = subnetsSchema.safeParse({ podSubnets: ['10.244.0.0/16', '10.245.0.0/16'] });
    expect(twoV4.success).toBe(false);
    expect(subnetsSchema.parse({})).toEqual({ podSubnets: ['10.244.0.0/16'], serviceSubnets: ['10.96.0.0/12'] });
  });

  it('does IPv4/IPv6 arithmetic', () => {
    expect(canonicalIp('2001:DB8:0:0:1:0:0:1')).toBe('2001:db8::1:0:0:1');
    expect(canonicalIp('::ffff:192.0.2.1')).toBe('::ffff:c000:201');
    expect(canonicalIp('2001:db8::1::1')).toBeUndefined();
    expect(canonicalIp('256.0.0.1')).toBeUndefined();
    const a = parseCidr('10.0.0.0/8');
    const b = parseCidr('10.96.0.0/12');
    const c = parseCidr('192.0.2.0/24');
    expect(a && b && cidrsOverlap(a, b)).toBe(true);
    expect(a && c && cidrsOverlap(a, c)).toBe(false);
  });
});

describe('validateConfigDocuments', () => {
  it('validates each document and reports paths', () => {
    const issues = validateConfigDocuments(
      'version: v1alpha1\npersist: true\nmachine:\n  install:\n    disk: 3\n---\napiVersion: v1alpha1\nkind: WireguardConfig\nname: wg0\n---\napiVersion: v1alpha1\nkind: Bogus\n',
    );
    expect(issues).toEqual([
      { path: 'machine.install.disk', message: 'must be string' },
      { path: 'WireguardConfig/wg0.privateKey', message: 'is required' },
      { path: 'Bogus.kind', message: 'is not a known Talos document kind' },
    ]);
    expect(validateConfigDocuments('version: v1alpha1\npersist: false\n')).toEqual([{ path: 'persist', message: 'must be true' }]);
  });
});
