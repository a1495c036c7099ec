import { parseAllDocuments } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { renderMachineConfig } from '../lib/talos/config.ts';
import type { MachineConfigInput } from '../lib/talos/config.ts';
import { validateConfigDocuments } from '../lib/talos/schema.ts';
import { generateSecrets } from '../lib/talos/secrets.ts';
import type { ClusterSecrets } from '../lib/talos/secrets.ts';
import { configErrorOf, configInput } from './support/config-input.ts';

let secrets: ClusterSecrets;
let otherSecrets: ClusterSecrets;
beforeAll(async () => {
  [secrets, otherSecrets] = await Promise.all([generateSecrets(), generateSecrets()]);
});

type Doc = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function docs(yaml: string): Doc[] {
  return parseAllDocuments(yaml).map((d) => {
    expect(d.errors).toEqual([]);
    return d.toJS() as Doc;
  });
}

const input = (overrides: Partial<MachineConfigInput> = {}): MachineConfigInput => configInput(secrets, 'controlplane', overrides);
const errorOf = configErrorOf;

describe('renderMachineConfig', () => {
  it('renders a control-plane config that validates against the v1.13.9 schema', () => {
    const yaml = renderMachineConfig(input());
    expect(validateConfigDocuments(yaml)).toEqual([]);
    const [v1, hostname] = docs(yaml) as [Doc, Doc];
    expect(v1.machine.type).toBe('controlplane');
    expect(Buffer.from(v1.machine.ca.key, 'base64').toString()).toBe(secrets.certs.os.keyPem);
    expect(Buffer.from(v1.cluster.etcd.ca.crt, 'base64').toString()).toBe(secrets.certs.etcd.certPem);
    expect(Buffer.from(v1.cluster.serviceAccount.key, 'base64').toString()).toBe(secrets.certs.k8sServiceAccount.keyPem);
    expect(v1.cluster.token).toBe(secrets.bootstrapToken);
    expect(v1.machine.token).toBe(secrets.trustdToken);
    expect(v1.cluster.secretboxEncryptionSecret).toBe(secrets.secretboxEncryptionSecret);
    expect(v1.machine.install).toMatchObject({
      disk: '/dev/sda',
      image: 'factory.talos.dev/installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.13.9',
    });
    expect(v1.machine.kubelet.image).toBe('ghcr.io/siderolabs/kubelet:v1.36.3');
    expect(v1.cluster.apiServer.image).toBe('registry.k8s.io/kube-apiserver:v1.36.3');
    expect(v1.cluster.network).toEqual({ dnsDomain: 'cluster.local', podSubnets: ['10.244.0.0/16'], serviceSubnets: ['10.96.0.0/12'] });
    expect(v1.machine.network).toBeUndefined();
    expect(hostname).toEqual({ apiVersion: 'v1alpha1', kind: 'HostnameConfig', auto: 'stable' });
  });

  it('renders a worker config without CA keys or control-plane sections', () => {
    const yaml = renderMachineConfig(input({ role: 'worker', hostname: 'Worker-1', talosVersion: '1.13.9' }));
    expect(validateConfigDocuments(yaml)).toEqual([]);
    const [v1, hostname] = docs(yaml) as [Doc, Doc];
    expect(v1.machine.type).toBe('worker');
    expect(v1.machine.ca.key).toBe('');
    expect(v1.cluster.ca.key).toBe('');
    expect(Buffer.from(v1.cluster.ca.crt, 'base64').toString()).toBe(secrets.certs.k8s.certPem);
    for (const key of ['etcd', 'apiServer', 'aggregatorCA', 'serviceAccount', 'secretboxEncryptionSecret']) {
      expect(v1.cluster[key], key).toBeUndefined();
    }
    expect(yaml).not.toContain(Buffer.from(secrets.certs.os.keyPem).toString('base64'));
    expect(hostname).toEqual({ apiVersion: 'v1alpha1', kind: 'HostnameConfig', hostname: 'worker-1' });
  });

  it('is deterministic for the same inputs and differs for different secrets', () => {
    const a = renderMachineConfig(input({ addresses: ['192.0.2.10', '2001:db8::10'] }));
    const b = renderMachineConfig(input({ addresses: ['2001:DB8:0::10', '192.0.2.10'] }));
    expect(b).toBe(a);
    const c = renderMachineConfig(input({ secrets: otherSecrets, addresses: ['192.0.2.10', '2001:db8::10'] }));
    expect(c).not.toBe(a);
  });

  it('puts an IPv6 endpoint and IPv6 addresses into certSANs', () => {
    const yaml = renderMachineConfig(
      input({ endpoint: 'https://[2001:DB8::1]:6443', addresses: ['2001:db8:0:0::20', '192.0.2.20'], network: {
        podSubnets: ['10.244.0.0/16', 'fd00:10:244::/56'],
        serviceSubnets: ['10.96.0.0/12', 'fd00:10:96::/112'],
      } }),
    );
    expect(validateConfigDocuments(yaml)).toEqual([]);
    const [v1] = docs(yaml) as [Doc];
    expect(v1.cluster.controlPlane.endpoint).toBe('https://[2001:db8::1]:6443');
    expect(v1.machine.certSANs).toEqual(['2001:db8::1', '192.0.2.20', '2001:db8::20']);
    expect(v1.cluster.apiServer.certSANs).toEqual(['2001:db8::1', '192.0.2.20', '2001:db8::20']);
    expect(v1.cluster.network.podSubnets).toEqual(['10.244.0.0/16', 'fd00:10:244::/56']);
  });

  it('uses a given schematic or installer image', () => {
    const schematic = 'a'.repeat(64);
    const [v1] = docs(renderMachineConfig(input({ schematic, talosVersion: 'v1.14.0-rc.1' }))) as [Doc];
    expect(v1.machine.install.image).toBe(`factory.talos.dev/installer/${schematic}:v1.14.0-rc.1`);
    const [v2] = docs(renderMachineConfig(input({ schematic, installerImage: 'ghcr.io/siderolabs/installer:v1.13.9' }))) as [Doc];
    expect(v2.machine.install.image).toBe('ghcr.io/siderolabs/installer:v1.13.9');
  });

  it('applies cluster patches, then machine patches (machine wins)', () => {
    const yaml = renderMachineConfig(
      input({
        clusterPatches: [
          'machine:\n  install:\n    wipe: true\n  sysctls:\n    net.core.somaxconn: "1024"\ncluster:\n  allowSchedulingOnControlPlanes: true\n',
        ],
        machinePatches: [
          { machine: { sysctls: { 'net.core.somaxconn': '4096' }, nodeLabels: null } },
          '{"machine": {"install": {"disk": "/dev/nvme0n1"}}}',
          'apiVersion: v1alpha1\nkind: HostnameConfig\nauto: null\nhostname: node-7\n---\napiVersion: v1alpha1\nkind: TimeSyncConfig\nntp:\n  servers: [time.example.test]\n',
        ],
      }),
    );
    expect(validateConfigDocuments(yaml)).toEqual([]);
    const [v1, hostname, timeSync] = docs(yaml) as [Doc, Doc, Doc];
    expect(v1.machine.sysctls).toEqual({ 'net.core.somaxconn': '4096' });
    expect(v1.machine.install).toMatchObject({ disk: '/dev/nvme0n1', wipe: true });
    expect(v1.cluster.allowSchedulingOnControlPlanes).toBe(true);
    expect(v1.machine.nodeLabels).toBeUndefined();
    expect(hostname).toEqual({ apiVersion: 'v1alpha1', kind: 'HostnameConfig', hostname: 'node-7' });
    expect(timeSync.kind).toBe('TimeSyncConfig');
  });

  it('rejects a patch that breaks the schema and names the path and the patch', () => {
    const error = errorOf(() => renderMachineConfig(input({ machinePatches: ['machine:\n  install:\n    disk: 42\n'] })));
    expect(error.message).toContain('machine.install.disk: must be string');
    expect(error.message).toContain('machinePatches[0]');
    const unknown = errorOf(() => renderMachineConfig(input({ clusterPatches: [{ machine: { network: { hostname: 'x' } } }] })));
    expect(unknown.issues).toContainEqual({ path: 'machine.network', message: 'unknown field (after clusterPatches[0])' });
  });

  it('rejects patches that break Talos rules the schema cannot express', () => {
    const error = errorOf(() => renderMachineConfig(input({ role: 'worker', machinePatches: [{ cluster: { etcd: { ca: { crt: 'x' } } } }] })));
    expect(error.issues.map((i) => i.path)).toContain('cluster.etcd');
    const noKey = errorOf(() => renderMachineConfig(input({ machinePatches: [{ machine: { ca: { key: null } } }] })));
    expect(noKey.issues.map((i) => i.path)).toContain('machine.ca.key');
  });

  it('rejects unparseable patches without echoing their text', () => {
    const error = errorOf(() => renderMachineConfig(input({ machinePatches: ['machine: [unclosed TOPSECRET'] })));
    expect(error.issues[0]?.path).toBe('machinePatches[0]');
    expect(error.message).not.toContain('TOPSECRET');
    const jsonPatch = errorOf(() => renderMachineConfig(input({ machinePatches: ['[{"op": "add", "path": "/x", "value": 1}]'] })));
    expect(jsonPatch.message).toMatch(/RFC 6902/);
  });

  it('rejects bad inputs naming the field', () => {
    const cases: [Partial<MachineConfigInput>, string][] = [
      [{ endpoint: 'http://cp:6443' }, 'endpoint'],
      [{ endpoint: 'https://cp' }, 'endpoint'],
      [{ endpoint: 'https://2001:db8::1:6443' }, 'endpoint'],
      [{ installDisk: 'sda' }, 'installDisk'],
      [{ talosVersion: 'latest' }, 'talosVersion'],
      [{ talosVersion: 'v1.11.6' }, 'talosVersion'],
      [{ kubernetesVersion: '1.36' }, 'kubernetesVersion'],
      [{ hostname: 'bad_host!' }, 'hostname'],
      [{ clusterName: 'Home Cluster' }, 'clusterName'],
      [{ addresses: ['not an address'] }, 'addresses.0'],
      [{ network: { podSubnets: ['10.0.0.0/8'], serviceSubnets: ['10.96.0.0/12'] } }, 'network.serviceSubnets.0'],
      [{ network: { podSubnets: ['10.244.0.1/16'] } }, 'network.podSubnets.0'],
      [{ schematic: 'xyz' }, 'schematic'],
      [{ role: 'init' as never }, 'role'],
    ];
    for (const [overrides, field] of cases) {
      const error = errorOf(() => renderMachineConfig(input(overrides)));
      expect(error.issues.map((i) => i.path), JSON.stringify(overrides)).toContain(field);
    }
  });
});
