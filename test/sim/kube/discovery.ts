// The API types the sim serves and the legacy discovery documents describing them (/api/v1,
// /apis, /apis/<group>, /apis/<group>/<version>), shaped like kube-apiserver's JSON: clients
// (client-go's discovery, kubectl, fluxcd's ssa) map a manifest's kind to its resource and scope
// from these before they write anything.

export interface ApiType {
  /** '' for the core group. */
  group: string;
  version: string;
  /** The plural, as it appears in paths. */
  resource: string;
  kind: string;
  namespaced: boolean;
  verbs: string[];
  shortNames?: string[];
  categories?: string[];
  /** metadata.generation is kept (1 at creation, +1 when anything outside metadata and status changes). */
  generation: boolean;
  /** Served from a CustomResourceDefinition or setResource: unstructured, list items carry apiVersion and kind, no strategic merge. */
  custom: boolean;
  subresources?: Array<{ name: string; kind: string; verbs: string[]; group?: string; version?: string }>;
}

export const apiVersionOf = (t: { group: string; version: string }): string => (t.group ? `${t.group}/${t.version}` : t.version);

const ALL = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

function type(gv: string, resource: string, kind: string, namespaced: boolean, more: Partial<ApiType> = {}): ApiType {
  const [group, version] = gv.includes('/') ? (gv.split('/') as [string, string]) : ['', gv];
  return { group, version, resource, kind, namespaced, verbs: ALL, generation: false, custom: false, ...more };
}

const gen = { generation: true };

/** What a recent kube-apiserver serves, trimmed to the groups bootstrap manifests and addons use. */
export function builtinTypes(): ApiType[] {
  return [
    type('v1', 'configmaps', 'ConfigMap', true, { shortNames: ['cm'] }),
    type('v1', 'endpoints', 'Endpoints', true, { shortNames: ['ep'] }),
    type('v1', 'events', 'Event', true, { shortNames: ['ev'] }),
    type('v1', 'limitranges', 'LimitRange', true, { shortNames: ['limits'] }),
    type('v1', 'namespaces', 'Namespace', false, { shortNames: ['ns'], verbs: ALL.filter((v) => v !== 'deletecollection') }),
    type('v1', 'nodes', 'Node', false, { shortNames: ['no'] }),
    type('v1', 'persistentvolumeclaims', 'PersistentVolumeClaim', true, { shortNames: ['pvc'] }),
    type('v1', 'persistentvolumes', 'PersistentVolume', false, { shortNames: ['pv'] }),
    type('v1', 'pods', 'Pod', true, {
      shortNames: ['po'],
      categories: ['all'],
      subresources: [{ name: 'eviction', kind: 'Eviction', verbs: ['create'], group: 'policy', version: 'v1' }],
    }),
    type('v1', 'resourcequotas', 'ResourceQuota', true, { shortNames: ['quota'] }),
    type('v1', 'secrets', 'Secret', true),
    type('v1', 'serviceaccounts', 'ServiceAccount', true, { shortNames: ['sa'] }),
    type('v1', 'services', 'Service', true, { shortNames: ['svc'], categories: ['all'] }),
    type('apps/v1', 'controllerrevisions', 'ControllerRevision', true),
    type('apps/v1', 'daemonsets', 'DaemonSet', true, { shortNames: ['ds'], categories: ['all'], ...gen }),
    type('apps/v1', 'deployments', 'Deployment', true, { shortNames: ['deploy'], categories: ['all'], ...gen }),
    type('apps/v1', 'replicasets', 'ReplicaSet', true, { shortNames: ['rs'], categories: ['all'], ...gen }),
    type('apps/v1', 'statefulsets', 'StatefulSet', true, { shortNames: ['sts'], categories: ['all'], ...gen }),
    type('batch/v1', 'cronjobs', 'CronJob', true, { shortNames: ['cj'], categories: ['all'], ...gen }),
    type('batch/v1', 'jobs', 'Job', true, { categories: ['all'], ...gen }),
    type('policy/v1', 'poddisruptionbudgets', 'PodDisruptionBudget', true, { shortNames: ['pdb'], ...gen }),
    type('rbac.authorization.k8s.io/v1', 'clusterrolebindings', 'ClusterRoleBinding', false),
    type('rbac.authorization.k8s.io/v1', 'clusterroles', 'ClusterRole', false),
    type('rbac.authorization.k8s.io/v1', 'rolebindings', 'RoleBinding', true),
    type('rbac.authorization.k8s.io/v1', 'roles', 'Role', true),
    type('apiextensions.k8s.io/v1', 'customresourcedefinitions', 'CustomResourceDefinition', false, { shortNames: ['crd', 'crds'], ...gen }),
    type('admissionregistration.k8s.io/v1', 'mutatingwebhookconfigurations', 'MutatingWebhookConfiguration', false, gen),
    type('admissionregistration.k8s.io/v1', 'validatingadmissionpolicies', 'ValidatingAdmissionPolicy', false, gen),
    type('admissionregistration.k8s.io/v1', 'validatingadmissionpolicybindings', 'ValidatingAdmissionPolicyBinding', false, gen),
    type('admissionregistration.k8s.io/v1', 'validatingwebhookconfigurations', 'ValidatingWebhookConfiguration', false, gen),
    type('apiregistration.k8s.io/v1', 'apiservices', 'APIService', false),
    type('coordination.k8s.io/v1', 'leases', 'Lease', true),
    type('discovery.k8s.io/v1', 'endpointslices', 'EndpointSlice', true),
    type('networking.k8s.io/v1', 'ingressclasses', 'IngressClass', false),
    type('networking.k8s.io/v1', 'ingresses', 'Ingress', true, { shortNames: ['ing'], ...gen }),
    type('networking.k8s.io/v1', 'networkpolicies', 'NetworkPolicy', true, { shortNames: ['netpol'], ...gen }),
    type('scheduling.k8s.io/v1', 'priorityclasses', 'PriorityClass', false, { shortNames: ['pc'] }),
    type('storage.k8s.io/v1', 'csidrivers', 'CSIDriver', false),
    type('storage.k8s.io/v1', 'csinodes', 'CSINode', false),
    type('storage.k8s.io/v1', 'storageclasses', 'StorageClass', false, { shortNames: ['sc'] }),
    type('storage.k8s.io/v1', 'volumeattachments', 'VolumeAttachment', false),
  ];
}

/** Kubernetes version priority: GA before beta before alpha, then the higher number. */
function versionRank(v: string): [number, number, number] {
  const m = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v);
  if (!m) return [0, 0, 0];
  return [m[2] === undefined ? 3 : m[2] === 'beta' ? 2 : 1, Number(m[1]), Number(m[3] ?? 0)];
}
const byPriority = (a: string, b: string): number => {
  const [x, y] = [versionRank(a), versionRank(b)];
  return y[0] - x[0] || y[1] - x[1] || y[2] - x[2] || a.localeCompare(b);
};

export class ApiTypes {
  private readonly types: ApiType[] = builtinTypes();

  /** Adds or replaces the type at group/version/resource. */
  put(t: ApiType): void {
    this.remove(t.group, t.version, t.resource);
    this.types.push(t);
  }

  remove(group: string, version: string, resource: string): void {
    const i = this.types.findIndex((t) => t.group === group && t.version === version && t.resource === resource);
    if (i >= 0) this.types.splice(i, 1);
  }

  byResource(group: string, version: string, resource: string): ApiType | undefined {
    return this.types.find((t) => t.group === group && t.version === version && t.resource === resource);
  }

  byKind(apiVersion: string, kind: string): ApiType | undefined {
    return this.types.find((t) => apiVersionOf(t) === apiVersion && t.kind === kind);
  }

  /** Every version serving group/resource (a CRD may serve several over the same objects). */
  versionsOf(group: string, resource: string): ApiType[] {
    return this.types.filter((t) => t.group === group && t.resource === resource);
  }

  groupVersions(group: string): string[] {
    return [...new Set(this.types.filter((t) => t.group === group).map((t) => t.version))].sort(byPriority);
  }

  /** The entries of /apis, groups in the order their first type was registered. */
  groups(): object[] {
    const names = [...new Set(this.types.filter((t) => t.group).map((t) => t.group))];
    return names.map((name) => this.group(name)!);
  }

  group(name: string): object | undefined {
    const versions = this.groupVersions(name).map((version) => ({ groupVersion: `${name}/${version}`, version }));
    if (!name || !versions.length) return undefined;
    return { name, versions, preferredVersion: versions[0] };
  }

  /** The APIResourceList of one group version, undefined when nothing serves it. */
  resourceList(group: string, version: string): object | undefined {
    const served = this.types.filter((t) => t.group === group && t.version === version).sort((a, b) => a.resource.localeCompare(b.resource));
    if (!served.length) return undefined;
    const resources = served.flatMap((t) => [
      {
        name: t.resource,
        singularName: t.kind.toLowerCase(),
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: t.verbs,
        ...(t.shortNames ? { shortNames: t.shortNames } : {}),
        ...(t.categories ? { categories: t.categories } : {}),
      },
      ...(t.subresources ?? []).map((s) => ({
        name: `${t.resource}/${s.name}`,
        singularName: '',
        namespaced: t.namespaced,
        ...(s.group !== undefined ? { group: s.group, version: s.version } : {}),
        kind: s.kind,
        verbs: s.verbs,
      })),
    ]);
    // The core list comes without apiVersion, as kube-apiserver serves /api/v1.
    return { kind: 'APIResourceList', ...(group ? { apiVersion: 'v1' } : {}), groupVersion: apiVersionOf({ group, version }), resources };
  }
}
