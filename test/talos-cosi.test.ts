/**
 * Reading Talos's bootstrap manifests over COSI (`cosi.resource.State/List` of
 * `Manifests.kubernetes.talos.dev` in `controlplane`), as `talosctl upgrade-k8s` does: the wire
 * format against upstream's field numbers, the client against the simulator over real mTLS, the
 * node's rules (roles, maintenance, the access policy), and the pure parse of the specs.
 */
import type { MethodDefinition } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { createTalosClient, TalosApiError, type CosiResource } from '../lib/talos/api/index.ts';
import { loadTalosServices } from '../lib/talos/api/proto-loader.ts';
import { bootstrapManifestObjects, MANIFEST_TYPE, MANIFESTS_NAMESPACE } from '../lib/talos/manifests.ts';
import { createTestOsCa, issueTestClientCert, startSimNode, testMachineConfig, type TestCa } from './sim/talos/index.ts';
import { closeAfterEach, eventually, expectRejection } from './talos-api-helpers.ts';

const track = closeAfterEach();

const TOKEN = 'abc123.0123456789abcdef';
const PROXY_IMAGE = 'registry.k8s.io/kube-proxy:v1.36.1';
const MANIFESTS = { namespace: MANIFESTS_NAMESPACE, type: MANIFEST_TYPE };

/** testMachineConfig with cluster (and machine) settings merged into its v1alpha1 document. */
function config(ca: TestCa, opts: { type?: 'controlplane' | 'worker'; cluster?: Record<string, unknown>; machine?: Record<string, unknown> } = {}): string {
  const docs = parseAllDocuments(testMachineConfig({ ca, type: opts.type ?? 'controlplane', hostname: 'cp-1' }));
  const v1 = docs[0]!;
  for (const [k, v] of Object.entries(opts.cluster ?? {})) v1.setIn(['cluster', k], v);
  for (const [k, v] of Object.entries(opts.machine ?? {})) v1.setIn(['machine', k], v);
  return docs.map((d) => d.toString()).join('---\n');
}

async function node(opts: Parameters<typeof config>[1] & { version?: string; roles?: string[] } = {}) {
  const ca = await createTestOsCa();
  const sim = track(await startSimNode({
    initialConfig: config(ca, opts),
    ...(opts.version ? { version: opts.version } : {}),
    ...(opts.type === 'worker' ? { workerIssuer: { certPem: ca.certPem, keyPem: ca.keyPem } } : {}),
  }));
  const cert = await issueTestClientCert(ca, opts.roles ? { roles: opts.roles } : {});
  const client = track(createTalosClient({ mode: 'configured', address: sim.address, ca: ca.certPem, cert: cert.certPem, key: cert.keyPem }));
  return { ca, sim, client };
}

const byManifest = (resources: CosiResource[], id: string): Array<Record<string, unknown>> =>
  bootstrapManifestObjects(resources).filter((o) => o.manifest === id).map((o) => o.object);

function containerImage(workload: Record<string, unknown> | undefined): unknown {
  const spec = (workload?.['spec'] as { template: { spec: { containers: Array<{ image: unknown }> } } } | undefined);
  return spec?.template.spec.containers[0]?.image;
}

const asTalosError = (err: unknown): TalosApiError => {
  expect(err).toBeInstanceOf(TalosApiError);
  return err as TalosApiError;
};

type AnyMethod = MethodDefinition<object, object>;
const cosiMethod = (name: string): AnyMethod => loadTalosServices().cosiState[name] as AnyMethod;
const tag = (field: number, wire: number): number => (field << 3) | wire;
const bytes = (s: string): number[] => [...Buffer.from(s)];
const field = (n: number, payload: number[]): number[] => [tag(n, 2), payload.length, ...payload];

describe('COSI wire format (cosi-project/specification v1alpha1)', () => {
  it('uses upstream paths; List streams its replies', () => {
    expect(cosiMethod('List').path).toBe('/cosi.resource.State/List');
    expect(cosiMethod('List').responseStream).toBe(true);
  });

  it('ListRequest: namespace=1, type=2', () => {
    expect([...cosiMethod('List').requestSerialize({ namespace: 'ns', type: 'T' })]).toEqual([...field(1, bytes('ns')), ...field(2, bytes('T'))]);
  });

  it('ListResponse: resource=1 {metadata=1 {namespace=1 type=2 id=3 version=4 owner=5 phase=6 labels=10}, spec=2 {yaml_spec=2}}', () => {
    const md = [
      ...field(1, bytes('cp')), ...field(2, bytes('T')), ...field(3, bytes('i')), ...field(4, bytes('3')),
      ...field(5, bytes('o')), ...field(6, bytes('running')), ...field(10, [...field(1, bytes('k')), ...field(2, bytes('v'))]),
    ];
    const spec = [...field(1, [0x01]), ...field(2, bytes('- a: 1\n'))];
    const reply = Buffer.from(field(1, [...field(1, md), ...field(2, spec)]));
    const decoded = cosiMethod('List').responseDeserialize(reply) as { resource: { metadata: Record<string, unknown>; spec: Record<string, unknown> } };
    expect(decoded.resource.metadata).toMatchObject({ namespace: 'cp', type: 'T', id: 'i', version: '3', owner: 'o', phase: 'running', labels: { k: 'v' } });
    expect(decoded.resource.spec['yaml_spec']).toBe('- a: 1\n');
  });
});

describe('listing the bootstrap manifests of a control plane', () => {
  it('lists every manifest Talos renders, by id, each with its objects; kube-proxy runs the configured image', async () => {
    const { client, sim } = await node({ cluster: { token: TOKEN, proxy: { image: PROXY_IMAGE } } });
    const resources = await client.listResources(MANIFESTS);
    expect(resources.map((r) => r.id)).toEqual([
      '00-kubelet-bootstrapping-token', '01-csr-approver-role-binding', '01-csr-node-bootstrap', '01-csr-renewal-role-binding',
      '05-flannel', '10-kube-proxy', '11-core-dns', '11-core-dns-svc', '11-kube-config-in-cluster', '11-talos-node-rbac-template',
    ]);
    for (const r of resources) {
      expect(r).toMatchObject({ namespace: 'controlplane', type: 'Manifests.kubernetes.talos.dev', version: '1', phase: 'running', owner: 'k8s.ManifestController' });
    }
    expect(sim.calls.map((c) => c.method)).toContain('cosi.resource.State/List');

    const proxy = byManifest(resources, '10-kube-proxy');
    expect(proxy.map((o) => `${o['kind']}/${(o['metadata'] as { name: string }).name}`)).toEqual(['DaemonSet/kube-proxy', 'ServiceAccount/kube-proxy', 'ClusterRoleBinding/kube-proxy']);
    expect(containerImage(proxy[0])).toBe(PROXY_IMAGE);
    // No image configured: Talos v1.13.9's default CoreDNS.
    expect(containerImage(byManifest(resources, '11-core-dns').find((o) => o['kind'] === 'Deployment'))).toBe('registry.k8s.io/coredns/coredns:v1.14.6');
    const [secret] = byManifest(resources, '00-kubelet-bootstrapping-token');
    expect(secret).toMatchObject({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'bootstrap-token-abc123', namespace: 'kube-system' }, stringData: { 'token-id': 'abc123', 'token-secret': '0123456789abcdef' } });
    expect(byManifest(resources, '11-core-dns-svc')[0]).toMatchObject({ kind: 'Service', metadata: { name: 'kube-dns' }, spec: { clusterIP: '10.96.0.10' } });
  });

  it('follows the config: a changed image moves only its manifest, inline manifests come last, disabled parts go', async () => {
    const { client, ca } = await node({ cluster: { token: TOKEN, proxy: { image: PROXY_IMAGE } } });
    const before = await client.listResources(MANIFESTS);
    const next = config(ca, {
      cluster: {
        token: TOKEN,
        proxy: { image: 'registry.k8s.io/kube-proxy:v1.36.2' },
        coreDNS: { disabled: true },
        network: { cni: { name: 'none' } },
        inlineManifests: [{
          name: 'extras',
          contents: '# only a comment\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: extras\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: extras\ndata:\n  a: "1"\n',
        }],
      },
    });
    await client.applyConfiguration({ data: Buffer.from(next), mode: 'no-reboot' });
    const after = await client.listResources(MANIFESTS);

    expect(after.map((r) => r.id)).toEqual([
      '00-kubelet-bootstrapping-token', '01-csr-approver-role-binding', '01-csr-node-bootstrap', '01-csr-renewal-role-binding',
      '10-kube-proxy', '11-kube-config-in-cluster', '11-talos-node-rbac-template', '99-extras',
    ]);
    const version = (list: CosiResource[], id: string): string | undefined => list.find((r) => r.id === id)?.version;
    expect(version(before, '10-kube-proxy')).toBe('1');
    expect(version(after, '10-kube-proxy')).toBe('2');
    expect(version(after, '00-kubelet-bootstrapping-token')).toBe('1');
    expect(containerImage(byManifest(after, '10-kube-proxy')[0])).toBe('registry.k8s.io/kube-proxy:v1.36.2');

    const extras = after.find((r) => r.id === '99-extras')!;
    expect(extras.owner).toBe('k8s.ExtraManifestController');
    expect(byManifest(after, '99-extras')).toEqual([
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'extras' } },
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'extras' }, data: { a: '1' } },
    ]);
  });

  it('renders the CoreDNS image the config names, and the Talos API CRD when pods may reach the Talos API', async () => {
    const { client } = await node({
      cluster: { coreDNS: { image: 'registry.k8s.io/coredns/coredns:v1.12.0' }, proxy: { disabled: true } },
      machine: { features: { kubernetesTalosAPIAccess: { enabled: true, allowedRoles: ['os:reader'] } } },
    });
    const resources = await client.listResources(MANIFESTS);
    expect(resources.map((r) => r.id)).not.toContain('10-kube-proxy');
    expect(resources.at(-1)?.id).toBe('13-talos-service-account-crd');
    expect(byManifest(resources, '13-talos-service-account-crd')[0]).toMatchObject({ kind: 'CustomResourceDefinition', metadata: { name: 'serviceaccounts.talos.dev' } });
    expect(containerImage(byManifest(resources, '11-core-dns').find((o) => o['kind'] === 'Deployment'))).toBe('registry.k8s.io/coredns/coredns:v1.12.0');
  });

  it('on a worker lists nothing', async () => {
    const { client } = await node({ type: 'worker', cluster: { token: TOKEN } });
    expect(await client.listResources(MANIFESTS)).toEqual([]);
  });

  it('works on a v1.12 node too: COSI is older than the v1.13 services', async () => {
    const { client } = await node({ version: 'v1.12.5', cluster: { token: TOKEN } });
    expect((await client.listResources(MANIFESTS)).length).toBeGreaterThan(5);
  });
});

describe("the node's rules", () => {
  it('lets a reader list the manifests (bootstrap token included: the type is not Sensitive); no role at all is refused', async () => {
    const reader = await node({ roles: ['os:reader'], cluster: { token: TOKEN } });
    const listed = await reader.client.listResources(MANIFESTS);
    expect(byManifest(listed, '00-kubelet-bootstrapping-token')[0]).toMatchObject({ stringData: { 'token-secret': '0123456789abcdef' } });
    const nobody = await node({ roles: [] });
    const err = asTalosError(await expectRejection(nobody.client.listResources(MANIFESTS)));
    expect(err.code).toBe('permission-denied');
    expect(err.method).toBe('cosi.resource.State/List');
  });

  it('refuses a type or namespace the node has no definition of, as its access policy does; an empty namespace lists nothing', async () => {
    const { client } = await node({ cluster: { token: TOKEN } });
    const type = asTalosError(await expectRejection(client.listResources({ namespace: 'controlplane', type: 'Nonsense.talos.dev' })));
    expect(type.code).toBe('permission-denied');
    expect(type.message).toContain('resource type "Nonsense.talos.dev" is not supported');
    const ns = asTalosError(await expectRejection(client.listResources({ namespace: 'nowhere', type: MANIFEST_TYPE })));
    expect(ns.code).toBe('permission-denied');
    expect(ns.message).toContain('namespace "nowhere" is not supported');
    expect(await client.listResources({ namespace: 'k8s', type: MANIFEST_TYPE })).toEqual([]);
  });

  it('in maintenance mode serves COSI reads (everyone is a reader there) but the node has no manifests yet', async () => {
    for (const version of ['v1.13.9', 'v1.12.5']) {
      const sim = track(await startSimNode({ version, uniqueMaintenanceCert: true }));
      const maint = track(createTalosClient({ mode: 'maintenance', address: sim.address, fingerprint: sim.maintenanceFingerprint }));
      expect(await maint.listResources(MANIFESTS)).toEqual([]);
      expect(sim.calls.at(-1)).toMatchObject({ method: 'cosi.resource.State/List', phase: 'maintenance' });
      // The same node would answer a control plane's manifests once configured: what is empty is the state, not the API.
      expect(asTalosError(await expectRejection(maint.listResources({ namespace: 'controlplane', type: 'Nonsense.talos.dev' }))).code).toBe('permission-denied');
    }
  });

  it('is delayed and cut by the deadline like any call', async () => {
    const { client, sim } = await node({ cluster: { token: TOKEN } });
    sim.setLatency(400);
    const err = asTalosError(await expectRejection(client.listResources(MANIFESTS, { deadlineMs: 100 })));
    expect(err.code).toBe('deadline');
    sim.setLatency(0);
    expect((await eventually(() => client.listResources(MANIFESTS))).length).toBeGreaterThan(5);
  });

  it('stops at once when the caller aborts', async () => {
    const { client, sim } = await node({ cluster: { token: TOKEN } });
    sim.setLatency(2_000);
    const abort = new AbortController();
    const pending = expectRejection(client.listResources(MANIFESTS, { signal: abort.signal }));
    setTimeout(() => abort.abort(), 50);
    const started = Date.now();
    expect(asTalosError(await pending).code).toBe('canceled');
    expect(Date.now() - started).toBeLessThan(1_500);
  });
});

describe('bootstrapManifestObjects', () => {
  const resource = (id: string, yamlSpec: string): CosiResource => ({ id, namespace: 'controlplane', type: MANIFEST_TYPE, version: '1', phase: 'running', owner: '', labels: {}, yamlSpec });

  it('keeps the order of the resources and of the objects in each; an empty list is no objects', () => {
    const objs = bootstrapManifestObjects([
      resource('10-b', '- apiVersion: v1\n  kind: ServiceAccount\n  metadata:\n    name: b1\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b2\n'),
      resource('99-empty', '[]\n'),
      resource('05-a', '- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: a\n'),
    ]);
    expect(objs.map((o) => `${o.manifest}:${(o.object['metadata'] as { name: string }).name}`)).toEqual(['10-b:b1', '10-b:b2', '05-a:a']);
  });

  it('rejects a spec that is not a list of objects, naming the manifest and never quoting the spec', () => {
    const secret = 'tok3n5ecret0000';
    const cases: Array<[string, RegExp]> = [
      [`- apiVersion: v1\n  kind: Secret\n  stringData: {token: ${secret}\n`, /^bootstrap manifest "00-x": spec is not valid YAML \(\w+ at line \d+, column \d+\)$/],
      [`apiVersion: v1\nkind: Secret\nmetadata:\n  name: ${secret}\n`, /^bootstrap manifest "00-x": spec is not a list of objects \(a mapping\)$/],
      ['', /^bootstrap manifest "00-x": spec is not a list of objects \(empty\)$/],
      [`- ${secret}\n`, /^bootstrap manifest "00-x": item 0 is not a mapping$/],
      [`- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: a\n- kind: Secret\n  data: {t: ${secret}}\n`, /^bootstrap manifest "00-x": item 1 has no apiVersion$/],
      [`- apiVersion: v1\n  metadata:\n    name: ${secret}\n`, /^bootstrap manifest "00-x": item 0 has no kind$/],
      [`- apiVersion: v1\n  kind: Secret\n  metadata:\n    generateName: ${secret}\n`, /^bootstrap manifest "00-x": item 0 \(Secret\) has no metadata.name$/],
    ];
    for (const [spec, message] of cases) {
      let thrown: unknown;
      try {
        bootstrapManifestObjects([resource('01-fine', '[]\n'), resource('00-x', spec)]);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, spec).toBeInstanceOf(Error);
      const msg = (thrown as Error).message;
      expect(msg, spec).toMatch(message);
      expect(msg).not.toContain(secret);
      expect((thrown as Error).cause).toBeUndefined();
    }
  });
});
