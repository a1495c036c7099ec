import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { NODE_LINK_NAME, nodeWireguardDocument } from '../lib/mesh/talos-doc.ts';
import { buildMachineDocuments } from '../lib/talos/config.ts';
import type { MachineConfigInput } from '../lib/talos/config.ts';
import { generateSecrets } from '../lib/talos/secrets.ts';
import type { ClusterSecrets } from '../lib/talos/secrets.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';
import { configErrorOf, configInput } from './support/config-input.ts';

let secrets: ClusterSecrets;
beforeAll(async () => {
  secrets = await generateSecrets();
});

const MESH_PRIVATE_KEY = 'aGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd28=';
const HCLOUD_TOKEN = 'hcloud-token-TOPSECRET-0123456789';

const meshDocument = () =>
  nodeWireguardDocument({
    privateKey: MESH_PRIVATE_KEY,
    ipv4: '100.64.0.2',
    ipv6: 'fd00::2',
    ipv4PrefixLength: 10,
    ipv6PrefixLength: 64,
    hubPublicKey: 'd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGU=',
    hubIpv4: '100.64.0.1',
    hubIpv6: 'fd00::1',
    endpoint: '[2001:db8::1]:51820',
  });

const input = (overrides: Partial<MachineConfigInput> = {}): MachineConfigInput => configInput(secrets, 'worker', overrides);
const errorOf = configErrorOf;

const hostnameDoc = (docs: Record<string, unknown>[]) => docs.find((d) => d.kind === 'HostnameConfig');

describe('Talos multi-document rules in buildMachineDocuments', () => {
  it('refuses a user LinkConfig named like the mesh WireguardConfig, naming the patch, without the key', () => {
    const withMesh = input({ extraDocuments: [meshDocument()] });
    const error = errorOf(() =>
      buildMachineDocuments({ ...withMesh, machinePatches: [`apiVersion: v1alpha1\nkind: LinkConfig\nname: ${NODE_LINK_NAME}\nmtu: 1280\n`] }),
    );
    expect(error.issues).toEqual([
      {
        path: 'LinkConfig/rzmesh0',
        message: 'conflicting documents: WireguardConfig/rzmesh0 and LinkConfig/rzmesh0 (use another name, or patch WireguardConfig/rzmesh0 instead) (after machinePatches[0])',
      },
    ]);
    expect(error.message).not.toContain(MESH_PRIVATE_KEY);

    // what the hint says works: patch the mesh link itself, or configure another link
    const mesh = buildMachineDocuments({ ...withMesh, machinePatches: [{ apiVersion: 'v1alpha1', kind: 'WireguardConfig', name: NODE_LINK_NAME, mtu: 1280 }] });
    expect(mesh.find((d) => d.kind === 'WireguardConfig')).toMatchObject({ name: NODE_LINK_NAME, mtu: 1280 });
    expect(() => buildMachineDocuments({ ...withMesh, machinePatches: ['apiVersion: v1alpha1\nkind: LinkConfig\nname: eth0\nmtu: 9000\n'] })).not.toThrow();
  });

  it('refuses a cluster DummyLinkConfig that takes the mesh link name, and two link kinds sharing a name in one patch', () => {
    const dummy = errorOf(() =>
      buildMachineDocuments(
        input({
          extraDocuments: [meshDocument()],
          clusterPatches: [{ apiVersion: 'v1alpha1', kind: 'DummyLinkConfig', name: NODE_LINK_NAME, addresses: [{ address: '192.0.2.1/32' }] }],
        }),
      ),
    );
    expect(dummy.issues.map((i) => i.path)).toEqual(['DummyLinkConfig/rzmesh0']);
    expect(dummy.message).toContain('conflicting documents: WireguardConfig/rzmesh0 and DummyLinkConfig/rzmesh0');
    expect(dummy.message).toContain('(after clusterPatches[0])');

    const both = errorOf(() =>
      buildMachineDocuments(
        input({
          machinePatches: [
            { machine: { sysctls: { 'vm.swappiness': '10' } } },
            'apiVersion: v1alpha1\nkind: DummyLinkConfig\nname: dummy0\n---\napiVersion: v1alpha1\nkind: LinkConfig\nname: dummy0\nmtu: 1500\n',
          ],
        }),
      ),
    );
    expect(both.issues).toEqual([
      {
        path: 'LinkConfig/dummy0',
        message: 'conflicting documents: DummyLinkConfig/dummy0 and LinkConfig/dummy0 (use another name, or patch DummyLinkConfig/dummy0 instead) (after machinePatches[1])',
      },
    ]);
  });

  it('refuses a user and an existing volume of one name, and both VIP kinds for one address, without the API token', () => {
    const volumes = errorOf(() =>
      buildMachineDocuments(
        input({
          machinePatches: [
            'apiVersion: v1alpha1\nkind: UserVolumeConfig\nname: data\nprovisioning:\n  diskSelector:\n    match: "!system_disk"\n',
            'apiVersion: v1alpha1\nkind: ExistingVolumeConfig\nname: data\ndiscovery:\n  volumeSelector:\n    match: volume.partition_label == "DATA"\n',
          ],
        }),
      ),
    );
    expect(volumes.issues).toEqual([
      {
        path: 'ExistingVolumeConfig/data',
        message: 'conflicting documents: UserVolumeConfig/data and ExistingVolumeConfig/data (use another name, or patch UserVolumeConfig/data instead) (after machinePatches[1])',
      },
    ]);

    const vips = errorOf(() =>
      buildMachineDocuments(
        input({
          role: 'controlplane',
          clusterPatches: [{ apiVersion: 'v1alpha1', kind: 'HCloudVIPConfig', name: '192.0.2.10', link: 'eth0', apiToken: HCLOUD_TOKEN }],
          machinePatches: [{ apiVersion: 'v1alpha1', kind: 'Layer2VIPConfig', name: '192.0.2.10', link: 'eth0' }],
        }),
      ),
    );
    expect(vips.issues.map((i) => i.path)).toEqual(['Layer2VIPConfig/192.0.2.10']);
    expect(vips.message).toContain('conflicting documents: HCloudVIPConfig/192.0.2.10 and Layer2VIPConfig/192.0.2.10');
    expect(vips.message).not.toContain(HCLOUD_TOKEN);
  });

  it('refuses duplicate documents and a second v1alpha1 document from extra documents, blaming no patch', () => {
    const harmless = [{ machine: { sysctls: { 'vm.swappiness': '10' } } }];
    const hostname = errorOf(() =>
      buildMachineDocuments(input({ extraDocuments: [{ apiVersion: 'v1alpha1', kind: 'HostnameConfig', auto: 'stable' }], machinePatches: harmless })),
    );
    expect(hostname.issues).toEqual([{ path: 'HostnameConfig', message: 'duplicate document: HostnameConfig' }]);

    const mesh = errorOf(() => buildMachineDocuments(input({ extraDocuments: [meshDocument(), meshDocument()], clusterPatches: harmless })));
    expect(mesh.issues).toEqual([{ path: 'WireguardConfig/rzmesh0', message: 'duplicate document: WireguardConfig/rzmesh0' }]);
    expect(mesh.message).not.toContain(MESH_PRIVATE_KEY);

    const v1alpha1 = buildMachineDocuments(input())[0] as Record<string, unknown>;
    const twice = errorOf(() => buildMachineDocuments(input({ extraDocuments: [v1alpha1] })));
    expect(twice.issues).toEqual([{ path: 'v1alpha1', message: 'duplicate v1alpha1.Config' }]);
  });

  it("refuses a HostnameConfig patch that leaves both 'auto' and 'hostname' set, and says how to fix it", () => {
    // no fixed hostname: the product writes auto: stable, the user's patch adds a hostname
    const added = errorOf(() => buildMachineDocuments(input({ machinePatches: ['apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: foo\n'] })));
    expect(added.issues).toHaveLength(1);
    expect(added.issues[0]?.path).toBe('HostnameConfig');
    expect(added.message).toContain("'auto' and 'hostname' cannot be set at the same time");
    expect(added.message).toContain('auto: null');
    expect(added.message).toContain('(after machinePatches[0])');
    const fixed = buildMachineDocuments(input({ machinePatches: ['apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: foo\nauto: null\n'] }));
    expect(hostnameDoc(fixed)).toEqual({ apiVersion: 'v1alpha1', kind: 'HostnameConfig', hostname: 'foo' });

    // a fixed hostname (a machine's name, through the API): a cluster patch asks for a stable one
    const stable = errorOf(() => buildMachineDocuments(input({ hostname: 'node-1', clusterPatches: [{ apiVersion: 'v1alpha1', kind: 'HostnameConfig', auto: 'stable' }] })));
    expect(stable.message).toContain("'auto' and 'hostname' cannot be set at the same time");
    expect(stable.message).toContain('hostname: null');
    expect(stable.message).toContain('(after clusterPatches[0])');
    const useAuto = buildMachineDocuments(input({ hostname: 'node-1', clusterPatches: [{ apiVersion: 'v1alpha1', kind: 'HostnameConfig', auto: 'stable', hostname: null }] }));
    expect(hostnameDoc(useAuto)).toEqual({ apiVersion: 'v1alpha1', kind: 'HostnameConfig', auto: 'stable' });
    // Go reads auto: off next to a hostname as no conflict
    expect(() => buildMachineDocuments(input({ hostname: 'node-1', machinePatches: [{ apiVersion: 'v1alpha1', kind: 'HostnameConfig', auto: 'off' }] }))).not.toThrow();
  });

  it("refuses a HostnameConfig left with neither 'auto' nor 'hostname'", () => {
    const error = errorOf(() => buildMachineDocuments(input({ machinePatches: [{ apiVersion: 'v1alpha1', kind: 'HostnameConfig', auto: null }] })));
    expect(error.issues).toHaveLength(1);
    expect(error.issues[0]?.path).toBe('HostnameConfig');
    expect(error.message).toContain("either 'auto' or 'hostname' must be set");
    expect(error.message).toContain('(after machinePatches[0])');
  });

  it('refuses patched hostnames Talos finds too long, without echoing them', () => {
    const longLabel = 'a'.repeat(64);
    const cases: [string, string][] = [
      [`${longLabel}.example.org`, 'must start with a label of 1-63 bytes'],
      ['.example.org', 'must start with a label of 1-63 bytes'],
      [`${'abcdefghi.'.repeat(25)}abcd`, 'must be at most 253 bytes'],
    ];
    for (const [hostname, message] of cases) {
      const error = errorOf(() => buildMachineDocuments(input({ hostname: 'node-1', machinePatches: [{ apiVersion: 'v1alpha1', kind: 'HostnameConfig', hostname }] })));
      expect(error.issues, hostname).toEqual([{ path: 'HostnameConfig.hostname', message: `${message} (after machinePatches[0])` }]);
      expect(error.message).not.toContain(hostname);
    }
    const longest = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
    expect(longest).toHaveLength(253);
    expect(() => buildMachineDocuments(input({ machinePatches: [{ apiVersion: 'v1alpha1', kind: 'HostnameConfig', hostname: longest, auto: null }] }))).not.toThrow();
  });
});

describe('Talos multi-document rules over the API', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await createHarness();
  });
  afterEach(async () => h.close());

  it('refuses a machine whose patch asks for auto next to its name as hostname, with the fix, and stores nothing', async () => {
    const { clusterId } = await seedCluster(h);
    const body = { name: 'w1', role: 'worker', provider: 'metal', patches: [{ apiVersion: 'v1alpha1', kind: 'HostnameConfig', auto: 'stable' }] };
    const bad = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/^patches: HostnameConfig: 'auto' and 'hostname' cannot be set at the same time/);
    expect(bad.body.error.message).toContain('hostname: null');
    expect((await h.call('GET', `/v1/clusters/${clusterId}/machines`)).body.machines).toHaveLength(0);

    // Talos would take auto alone, but the node would no longer be named after the machine.
    const renamed = await h.call('POST', `/v1/clusters/${clusterId}/machines`, {
      body: { ...body, patches: [{ apiVersion: 'v1alpha1', kind: 'HostnameConfig', auto: 'stable', hostname: null }] },
    });
    expect(renamed.status).toBe(400);
    expect(renamed.body.error.message).toMatch(/^patches: HostnameConfig: the hostname must stay the machine's name, w1 .*Kubernetes and etcd/);
    for (const hostname of ['w2', 'web.home.arpa']) {
      const other = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { ...body, patches: [{ apiVersion: 'v1alpha1', kind: 'HostnameConfig', hostname }] } });
      expect(other.status).toBe(400);
    }
    expect((await h.call('GET', `/v1/clusters/${clusterId}/machines`)).body.machines).toHaveLength(0);

    // A domain after the machine's name keeps the node's name.
    const fqdn = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { ...body, patches: [{ apiVersion: 'v1alpha1', kind: 'HostnameConfig', hostname: 'w1.home.arpa' }] } });
    expect(fqdn.status, JSON.stringify(fqdn.body)).toBe(201);
    expect((await h.call('GET', `/v1/clusters/${clusterId}/machines/${fqdn.body.id}/config`)).body).toContain('hostname: w1.home.arpa');
  });

  it('refuses a cluster patch with two link kinds of one name and keeps the stored patches', async () => {
    const { clusterId } = await seedCluster(h, 'home', { patches: [{ machine: { sysctls: { 'vm.swappiness': '10' } } }] });
    const bad = await h.call('PATCH', `/v1/clusters/${clusterId}`, {
      body: {
        patches: [
          { apiVersion: 'v1alpha1', kind: 'DummyLinkConfig', name: 'lb0', addresses: [{ address: '192.0.2.53/32' }] },
          { apiVersion: 'v1alpha1', kind: 'LinkConfig', name: 'lb0', mtu: 1500 },
        ],
      },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('LinkConfig/lb0: conflicting documents: DummyLinkConfig/lb0 and LinkConfig/lb0');
    expect(bad.body.error.message).toContain('(after clusterPatches[1])');
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body.settings.patches).toEqual([{ machine: { sysctls: { 'vm.swappiness': '10' } } }]);
  });

  it('checks a mesh node\'s patches against its WireguardConfig when the machine or the cluster is patched', async () => {
    const { clusterId } = await seedCluster(h);
    const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: 'w1', role: 'worker', provider: 'metal' } });
    expect(m.status).toBe(201);
    const on = await h.call('PUT', `/v1/clusters/${clusterId}/mesh`, { body: { endpoint: '203.0.113.7:51820' } });
    expect(on.status).toBe(200);
    const link = { apiVersion: 'v1alpha1', kind: 'LinkConfig', name: NODE_LINK_NAME, mtu: 1280 };

    const machinePatch = await h.call('PATCH', `/v1/clusters/${clusterId}/machines/${m.body.id}`, { body: { patches: [link] } });
    expect(machinePatch.status).toBe(400);
    expect(machinePatch.body.error.message).toContain(`conflicting documents: WireguardConfig/${NODE_LINK_NAME} and LinkConfig/${NODE_LINK_NAME}`);
    expect((await h.call('GET', `/v1/clusters/${clusterId}/machines/${m.body.id}`)).body.patches).toEqual([]);

    const clusterPatch = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { patches: [{ ...link, kind: 'DummyLinkConfig' }] } });
    expect(clusterPatch.status).toBe(400);
    expect(clusterPatch.body.error.message).toMatch(/^machines\.w1: /);
    expect(clusterPatch.body.error.message).toContain(`conflicting documents: WireguardConfig/${NODE_LINK_NAME} and DummyLinkConfig/${NODE_LINK_NAME}`);
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body.settings.patches ?? []).toEqual([]);
    // The node's config still renders, with its mesh link.
    const config = await h.call('GET', `/v1/clusters/${clusterId}/machines/${m.body.id}/config`);
    expect(config.status).toBe(200);
  });
});
