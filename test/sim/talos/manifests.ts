/**
 * The bootstrap manifests a simulated control plane holds as COSI resources
 * (`Manifests.kubernetes.talos.dev` in namespace `controlplane`), rendered from its machine config
 * the way Talos's k8s.ManifestController and k8s.ExtraManifestController do
 * (internal/app/machined/pkg/controllers/k8s/manifest.go, extra_manifest.go): the same resource
 * ids and owners, and for each the same Kubernetes objects (kind, name, namespace, the images the
 * config chooses), with the long parts of Talos's templates (probes, volumes, RBAC rules) cut short.
 */
import { CORE_SCHEMA, loadAll, YAMLException } from 'js-yaml';
import { stringify } from 'yaml';
import type { SimMachineConfig } from './sim-config.ts';

export const SIM_MANIFESTS_NAMESPACE = 'controlplane';
export const SIM_MANIFEST_TYPE = 'Manifests.kubernetes.talos.dev';

const MANIFEST_OWNER = 'k8s.ManifestController';
const EXTRA_MANIFEST_OWNER = 'k8s.ExtraManifestController';

// Talos v1.13.9's defaults (pkg/machinery/constants, pkg/images): what a config that names no image
// runs. The sim reports v1.13.9 unless told otherwise and models no other release's defaults.
const DEFAULT_COREDNS_IMAGE = 'registry.k8s.io/coredns/coredns:v1.14.6';
const DEFAULT_PROXY_IMAGE = 'registry.k8s.io/kube-proxy:v1.36.3';
const FLANNEL_IMAGE = 'ghcr.io/siderolabs/flannel:0.28.8';
const DEFAULT_POD_SUBNET = '10.244.0.0/16';
const DEFAULT_SERVICE_SUBNET = '10.96.0.0/12';
const DEFAULT_DNS_DOMAIN = 'cluster.local';
const DEFAULT_KUBEPRISM_PORT = 7445;

type KubeObject = Record<string, unknown>;

export interface RenderedManifest {
  id: string;
  owner: string;
  objects: KubeObject[];
}

const meta = (name: string, namespace?: string, labels?: Record<string, string>): KubeObject => ({
  name,
  ...(namespace ? { namespace } : {}),
  ...(labels ? { labels } : {}),
});

const clusterRoleBinding = (name: string, role: string, subjects: KubeObject[]): KubeObject => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRoleBinding',
  metadata: meta(name),
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
  subjects,
});

const group = (name: string): KubeObject => ({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name });
const serviceAccountSubject = (name: string): KubeObject => ({ kind: 'ServiceAccount', name, namespace: 'kube-system' });
const serviceAccount = (name: string, labels?: Record<string, string>): KubeObject => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(name, 'kube-system', labels) });

/** clusterToken.ID()/Secret(): anything but exactly `<id>.<secret>` gives empty parts, as upstream. */
function tokenParts(token: string | undefined): { id: string; secret: string } {
  const parts = (token ?? '').split('.');
  return parts.length === 2 ? { id: parts[0]!, secret: parts[1]! } : { id: '', secret: '' };
}

/** The 10th address of the first IPv4 service subnet (k8s.DNSServiceAddrs); IPv6 is not modelled. */
function dnsServiceIp(subnets: string[]): string | undefined {
  for (const cidr of subnets) {
    const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(cidr);
    if (!m) continue;
    const base = m.slice(1, 5).reduce((acc, o) => acc * 256 + Number(o), 0);
    const bits = Number(m[5]);
    const network = bits === 0 ? 0 : base - (base % 2 ** (32 - bits));
    const ip = network + 10;
    return [24, 16, 8, 0].map((s) => Math.floor(ip / 2 ** s) % 256).join('.');
  }
  return undefined;
}

function kubeProxy(image: string, podSubnets: string[]): KubeObject[] {
  const labels = { 'k8s-app': 'kube-proxy', tier: 'node' };
  return [
    {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: meta('kube-proxy', 'kube-system', labels),
      spec: {
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            containers: [{
              name: 'kube-proxy',
              image,
              command: ['/usr/local/bin/kube-proxy', `--cluster-cidr=${podSubnets.join(',')}`, '--hostname-override=$(NODE_NAME)', '--kubeconfig=/etc/kubernetes/kubeconfig'],
              env: [{ name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }],
              securityContext: { privileged: true },
            }],
            hostNetwork: true,
            priorityClassName: 'system-cluster-critical',
            serviceAccountName: 'kube-proxy',
            tolerations: [{ effect: 'NoSchedule', operator: 'Exists' }, { effect: 'NoExecute', operator: 'Exists' }],
          },
        },
        updateStrategy: { rollingUpdate: { maxUnavailable: 1 }, type: 'RollingUpdate' },
      },
    },
    serviceAccount('kube-proxy'),
    clusterRoleBinding('kube-proxy', 'system:node-proxier', [serviceAccountSubject('kube-proxy')]),
  ];
}

function coreDns(image: string, domain: string): KubeObject[] {
  const rbacDefaults = { 'kubernetes.io/bootstrapping': 'rbac-defaults' };
  return [
    serviceAccount('coredns'),
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: meta('system:coredns', undefined, rbacDefaults),
      rules: [{ apiGroups: [''], resources: ['endpoints', 'services', 'pods', 'namespaces'], verbs: ['list', 'watch'] }],
    },
    { ...clusterRoleBinding('system:coredns', 'system:coredns', [serviceAccountSubject('coredns')]), metadata: meta('system:coredns', undefined, rbacDefaults) },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: meta('coredns', 'kube-system'),
      data: { Corefile: `.:53 {\n    errors\n    health\n    ready\n    kubernetes ${domain} in-addr.arpa ip6.arpa {\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n    }\n    forward . /etc/resolv.conf\n    cache 30\n    loop\n    reload\n}\n` },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta('coredns', 'kube-system', { 'k8s-app': 'kube-dns', 'kubernetes.io/name': 'CoreDNS' }),
      spec: {
        replicas: 2,
        selector: { matchLabels: { 'k8s-app': 'kube-dns' } },
        strategy: { rollingUpdate: { maxUnavailable: 1 }, type: 'RollingUpdate' },
        template: {
          metadata: { labels: { 'k8s-app': 'kube-dns' } },
          spec: {
            containers: [{ name: 'coredns', image, imagePullPolicy: 'IfNotPresent', args: ['-conf', '/etc/coredns/Corefile'] }],
            priorityClassName: 'system-cluster-critical',
            serviceAccountName: 'coredns',
          },
        },
      },
    },
  ];
}

function coreDnsService(clusterIp: string | undefined): KubeObject {
  const ports = [
    { name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 },
    { name: 'dns-tcp', port: 53, protocol: 'TCP', targetPort: 53 },
    { name: 'metrics', port: 9153, protocol: 'TCP', targetPort: 9153 },
  ];
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta('kube-dns', 'kube-system', { 'k8s-app': 'kube-dns', 'kubernetes.io/cluster-service': 'true', 'kubernetes.io/name': 'CoreDNS' }),
    spec: { ...(clusterIp ? { clusterIP: clusterIp, clusterIPs: [clusterIp] } : {}), ports, selector: { 'k8s-app': 'kube-dns' } },
  };
}

function flannel(podSubnets: string[]): KubeObject[] {
  const labels = { 'k8s-app': 'flannel' };
  const network = podSubnets.find((s) => !s.includes(':')) ?? podSubnets[0] ?? DEFAULT_POD_SUBNET;
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: meta('flannel', undefined, labels),
      rules: [{ apiGroups: [''], resources: ['pods', 'nodes', 'namespaces'], verbs: ['get', 'list', 'watch'] }, { apiGroups: [''], resources: ['nodes/status'], verbs: ['patch'] }],
    },
    { ...clusterRoleBinding('flannel', 'flannel', [serviceAccountSubject('flannel')]), metadata: meta('flannel', undefined, labels) },
    serviceAccount('flannel', labels),
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: meta('kube-flannel-cfg', 'kube-system', { ...labels, tier: 'node' }),
      data: { 'net-conf.json': JSON.stringify({ Network: network, Backend: { Type: 'vxlan', Port: 4789 } }, null, 2) },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: meta('kube-flannel', 'kube-system', { ...labels, tier: 'node' }),
      spec: {
        selector: { matchLabels: labels },
        template: {
          metadata: { labels: { ...labels, tier: 'node' } },
          spec: {
            containers: [{ name: 'kube-flannel', image: FLANNEL_IMAGE, command: ['/opt/bin/flanneld', '--ip-masq', '--kube-subnet-mgr'] }],
            hostNetwork: true,
            priorityClassName: 'system-node-critical',
            serviceAccountName: 'flannel',
          },
        },
      },
    },
  ];
}

function kubeconfigInCluster(server: string): KubeObject {
  const kubeconfig = stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'local', cluster: { server, 'certificate-authority': '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt' } }],
    users: [{ name: 'service-account', user: { tokenFile: '/var/run/secrets/kubernetes.io/serviceaccount/token' } }],
    contexts: [{ name: 'local', context: { cluster: 'local', user: 'service-account' } }],
    'current-context': 'local',
  });
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: meta('kubeconfig-in-cluster', 'kube-system'), data: { kubeconfig } };
}

function talosNodesRbac(): KubeObject[] {
  const labels = { 'kubernetes.io/bootstrapping': 'rbac-defaults' };
  return [
    { ...clusterRoleBinding('system:talos-nodes', 'system:talos-nodes', [group('system:nodes')]), metadata: meta('system:talos-nodes', undefined, labels) },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: meta('system:talos-nodes', undefined, labels),
      rules: [{ apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['get', 'list', 'watch'] }],
    },
  ];
}

function talosServiceAccountCrd(): KubeObject {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: meta('serviceaccounts.talos.dev'),
    spec: {
      group: 'talos.dev',
      names: { kind: 'ServiceAccount', listKind: 'ServiceAccountList', plural: 'serviceaccounts', singular: 'serviceaccount', shortNames: ['tsa'] },
      scope: 'Namespaced',
      versions: [{ name: 'v1alpha1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }],
    },
  };
}

/**
 * An inline manifest's objects as the adapter's SetYAML reads them: documents that are empty or
 * only comments skipped, a `…List` unwrapped into its items. Undefined where Talos's controller
 * fails on it (not YAML, or a document the unstructured decoder refuses for want of a kind),
 * and so writes no resource for it.
 */
function inlineObjects(contents: string): KubeObject[] | undefined {
  let docs: unknown[];
  try {
    docs = loadAll(contents, null, { schema: CORE_SCHEMA });
  } catch (err) {
    if (err instanceof YAMLException) return undefined;
    throw err;
  }
  const objects: KubeObject[] = [];
  for (const doc of docs) {
    if (doc === null || doc === undefined) continue;
    if (typeof doc !== 'object' || Array.isArray(doc)) return undefined;
    const o = doc as KubeObject;
    if (Object.keys(o).length === 0) continue;
    if (typeof o['kind'] !== 'string' || o['kind'] === '') return undefined;
    if (Array.isArray(o['items'])) {
      for (const item of o['items'] as unknown[]) {
        if (item === null || typeof item !== 'object' || Array.isArray(item)) return undefined;
        objects.push(item as KubeObject);
      }
    } else {
      objects.push(o);
    }
  }
  return objects;
}

/** The manifests a node with this config holds: none but on a control plane, as controlplaneMapFunc maps them. */
export function renderManifests(cfg: SimMachineConfig | undefined): RenderedManifest[] {
  if (cfg?.type !== 'controlplane') return [];
  const c = cfg.cluster;
  const token = tokenParts(c.token);
  const podSubnets = c.podSubnets.length > 0 ? c.podSubnets : [DEFAULT_POD_SUBNET];
  const serviceSubnets = c.serviceSubnets.length > 0 ? c.serviceSubnets : [DEFAULT_SERVICE_SUBNET];
  const prism = cfg.features.kubePrism;
  const server = prism.enabled ? `https://127.0.0.1:${prism.port ?? DEFAULT_KUBEPRISM_PORT}` : (c.endpoint ?? '');
  const own = (id: string, objects: KubeObject[]): RenderedManifest => ({ id, owner: MANIFEST_OWNER, objects });

  const out: RenderedManifest[] = [
    own('00-kubelet-bootstrapping-token', [{
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: meta(`bootstrap-token-${token.id}`, 'kube-system'),
      type: 'bootstrap.kubernetes.io/token',
      stringData: { 'auth-extra-groups': 'system:bootstrappers:nodes', 'token-id': token.id, 'token-secret': token.secret, 'usage-bootstrap-authentication': 'true' },
    }]),
    own('01-csr-node-bootstrap', [clusterRoleBinding('system-bootstrap-node-bootstrapper', 'system:node-bootstrapper', [group('system:bootstrappers:nodes'), group('system:nodes')])]),
    own('01-csr-approver-role-binding', [clusterRoleBinding('system-bootstrap-approve-node-client-csr', 'system:certificates.k8s.io:certificatesigningrequests:nodeclient', [group('system:bootstrappers:nodes')])]),
    own('01-csr-renewal-role-binding', [clusterRoleBinding('system-bootstrap-node-renewal', 'system:certificates.k8s.io:certificatesigningrequests:selfnodeclient', [group('system:nodes')])]),
    own('11-kube-config-in-cluster', [kubeconfigInCluster(server)]),
    own('11-talos-node-rbac-template', talosNodesRbac()),
  ];
  if (!c.coreDNS.disabled) {
    out.push(own('11-core-dns', coreDns(c.coreDNS.image ?? DEFAULT_COREDNS_IMAGE, c.dnsDomain ?? DEFAULT_DNS_DOMAIN)));
    out.push(own('11-core-dns-svc', [coreDnsService(dnsServiceIp(serviceSubnets))]));
  }
  if ((c.cniName ?? 'flannel') === 'flannel') out.push(own('05-flannel', flannel(podSubnets)));
  if (!c.proxyDisabled) out.push(own('10-kube-proxy', kubeProxy(cfg.images.proxy ?? DEFAULT_PROXY_IMAGE, podSubnets)));
  if (cfg.features.kubernetesTalosAPIAccess) out.push(own('13-talos-service-account-crd', [talosServiceAccountCrd()]));
  // ControlPlaneExtraManifestsController gives inline manifests priority 99: `99-<name>`, after Talos's own.
  for (const m of c.inlineManifests) {
    const objects = inlineObjects(m.contents);
    if (objects) out.push({ id: `99-${m.name}`, owner: EXTRA_MANIFEST_OWNER, objects });
  }
  return out;
}

export interface SimCosiResource {
  namespace: string;
  type: string;
  id: string;
  /** COSI's counter: 1 when created, one more with every change of the spec. */
  version: number;
  owner: string;
  phase: 'running';
  created: Date;
  updated: Date;
  /** ManifestSpec.MarshalYAML: the bare list of objects. */
  yamlSpec: string;
}

/**
 * The node's Manifest resources. A controller rewrites a resource only when its content changes
 * (an unchanged Modify writes nothing), so the version says whether the config changed what it renders.
 */
export class SimManifestStore {
  private readonly byId = new Map<string, SimCosiResource>();
  private read = false;

  /**
   * A config the node starts running. Rendered at once only on a node whose manifests were read
   * before, so every change moves the versions as on a node; a fleet of sims nobody asks pays nothing.
   */
  configChanged(cfg: SimMachineConfig): void {
    if (this.read) this.sync(cfg);
  }

  sync(cfg: SimMachineConfig | undefined): void {
    const now = new Date();
    const rendered = renderManifests(cfg);
    const ids = new Set(rendered.map((m) => m.id));
    for (const id of [...this.byId.keys()]) if (!ids.has(id)) this.byId.delete(id);
    for (const m of rendered) {
      // Keys sorted, as Go's YAML encoder writes maps.
      const yamlSpec = stringify(m.objects, { sortMapEntries: true });
      const prev = this.byId.get(m.id);
      if (prev?.yamlSpec === yamlSpec) continue;
      this.byId.set(m.id, {
        namespace: SIM_MANIFESTS_NAMESPACE,
        type: SIM_MANIFEST_TYPE,
        id: m.id,
        version: prev ? prev.version + 1 : 1,
        owner: m.owner,
        phase: 'running',
        created: prev?.created ?? now,
        updated: now,
        yamlSpec,
      });
    }
  }

  /** By id, as COSI's in-memory state lists. */
  list(): SimCosiResource[] {
    this.read = true;
    return [...this.byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }
}
