// What a Kubernetes minor removes that a cluster's machine configs or objects may still use, so an
// upgrade into that minor is refused before any node moves, as `talosctl upgrade-k8s` does: a
// component given a flag or feature gate its new version no longer knows refuses to start, and
// objects of an API version no longer served cannot be read or written through it.
// Facts from siderolabs/go-kubernetes kubernetes/upgrade (its checks up to 1.36->1.37) and the
// Kubernetes changelogs it cites. Upstream reads the flags off the running static pods; RezusCloud
// renders every config an upgrade pushes, so it checks those, and every component's feature gates
// (a removed gate is unknown to all of them).
import type { ConfigDocument } from './patch.ts';
import { COMPONENT_SECTION, K8S_COMPONENTS, type K8sComponent } from './k8s-images.ts';
import { isV1Alpha1 } from './schema.ts';
import { parseVersion } from './versions.ts';


export interface RemovedInMinor {
  featureGates: readonly string[];
  flags: Partial<Record<K8sComponent, readonly string[]>>;
  /** Names for kube-apiserver's `enable-admission-plugins`. */
  admissionPlugins: readonly string[];
  /** API resources no longer served, as `resource.version.group` (`kubectl get` spelling). */
  resources: readonly string[];
}

const none: RemovedInMinor = { featureGates: [], flags: {}, admissionPlugins: [], resources: [] };
const removed = (r: Partial<RemovedInMinor>): RemovedInMinor => ({ ...none, ...r });

/** Kubernetes minor (1.N) → what it removed. A minor absent here is not known to this table, not known to remove nothing. */
const REMOVED: Readonly<Record<number, RemovedInMinor>> = {
  25: removed({
    featureGates: ['CSIVolumeFSGroupPolicy', 'ConfigurableFSGroupPolicy', 'PodDisruptionBudget', 'SelectorIndex'],
    flags: { 'kube-apiserver': ['service-account-api-audiences'], 'kube-controller-manager': ['deleting-pods-qps', 'deleting-pods-burst', 'register-retry-count'] },
    admissionPlugins: ['PodSecurityPolicy'],
    resources: ['podsecuritypolicies.v1beta1.policy'],
  }),
  26: removed({ featureGates: ['DynamicKubeletConfig'], flags: { 'kube-apiserver': ['master-service-namespace'] } }),
  27: removed({
    featureGates: [
      'ExpandCSIVolumes', 'ExpandInUsePersistentVolumes', 'ExpandPersistentVolumes', 'ControllerManagerLeaderMigration', 'CSIMigration', 'CSIInlineVolume',
      'EphemeralContainers', 'LocalStorageCapacityIsolation', 'NetworkPolicyEndPort', 'StatefulSetMinReadySeconds', 'IdentifyPodOS', 'DaemonSetUpdateSurge',
    ],
    flags: { 'kube-controller-manager': ['enable-taint-manager', 'pod-eviction-timeout'], kubelet: ['container-runtime', 'master-service-namespace'] },
  }),
  28: removed({
    featureGates: [
      'AdvancedAuditing', 'DelegateFSGroupToCSIDriver', 'DevicePlugins', 'DisableAcceleratorUsageMetrics', 'EndpointSliceTerminatingCondition', 'CSIStorageCapacity',
      'CSIMigrationGCE', 'KubeletCredentialProviders', 'MixedProtocolLBService', 'ServiceInternalTrafficPolicy', 'ServiceIPStaticSubrange', 'WindowsHostProcessContainers',
    ],
  }),
  29: removed({ resources: ['clustercidrs.v1alpha1.networking.k8s.io'] }),
  30: removed({
    featureGates: [
      'ExpandedDNSConfig', 'ExperimentalHostUserNamespaceDefaultingGate', 'IPTablesOwnershipCleanup', 'KubeletPodResources', 'KubeletPodResourcesGetAllocatable',
      'MinimizeIPTablesRestore', 'ProxyTerminatingEndpoints', 'RemoveSelfLink',
    ],
    admissionPlugins: ['SecurityContextDeny'],
  }),
  31: removed({
    featureGates: ['APIPriorityAndFairness', 'CSINodeExpandSecret', 'ConsistentHTTPGetHandlers', 'DefaultHostNetworkHostPortsInPodTemplates', 'ServiceNodePortStaticSubrange', 'SkipReadOnlyValidationGCE'],
    flags: {
      kubelet: ['keep-terminated-pod-volumes', 'iptables-masquerade-bit', 'iptables-drop-bit'],
      'kube-controller-manager': ['volume-host-cidr-denylist', 'volume-host-allow-local-loopback', 'horizontal-pod-autoscaler-upscale-delay', 'horizontal-pod-autoscaler-downscale-delay'],
    },
  }),
  32: removed({
    featureGates: [
      'AllowServiceLBStatusOnNonLB', 'CloudDualStackNodeIPs', 'DRAControlPlaneController', 'HPAContainerMetrics', 'KMSv2', 'KMSv2KDF', 'LegacyServiceAccountTokenCleanUp',
      'MinDomainsInPodTopologySpread', 'NewVolumeManagerReconstruction', 'NodeOutOfServiceVolumeDetach', 'ServerSideApply', 'ServerSideFieldValidation',
      'StableLoadBalancerNodeSet', 'ValidatingAdmissionPolicy', 'ZeroLimitedNominalConcurrencyShares',
    ],
    resources: ['podschedulingcontexts.v1alpha3.resource.k8s.io'],
  }),
  33: removed({
    featureGates: [
      'AppArmor', 'AppArmorFields', 'CPUManager', 'DisableCloudProviders', 'DisableKubeletCloudCredentialProviders', 'JobPodFailurePolicy',
      'KubeProxyDrainingTerminatingNodes', 'PDBUnhealthyPodEvictionPolicy', 'PersistentVolumeLastPhaseTransitionTime', 'VolumeCapacityPriority',
    ],
    flags: { 'kube-apiserver': ['cloud-config'] },
  }),
  34: removed({ featureGates: ['DevicePluginCDIDevices', 'LegacySidecarContainers', 'PodDisruptionConditions'], flags: { kubelet: ['cloud-config'] } }),
  35: removed({ featureGates: ['SizeMemoryBackedVolumes', 'UserNamespacesHostNetworkSupport'], flags: { kubelet: ['pod-infra-container-image'] } }),
  36: removed({ featureGates: ['CSIMigrationPortworx', 'HonorPVReclaimPolicy', 'InTreePluginPortworxUnregister', 'WatchFromStorageWithoutResourceVersion'] }),
  37: removed({
    featureGates: ['AnyVolumeDataSource', 'DeclarativeValidationTakeover', 'GangScheduling', 'PreventStaticPodAPIReferences', 'WorkloadAwarePreemption'],
    resources: ['workloads.v1alpha2.scheduling.k8s.io', 'podgroups.v1alpha2.scheduling.k8s.io'],
    // cAdvisor's flags: a kubelet given any of them no longer starts.
    flags: {
      kubelet: [
        'application-metrics-count-limit', 'boot-id-file', 'container-hints', 'containerd', 'containerd-namespace', 'enable-load-reader', 'event-storage-age-limit',
        'event-storage-event-limit', 'global-housekeeping-interval', 'log-cadvisor-usage', 'machine-id-file', 'storage-driver-user', 'storage-driver-password',
        'storage-driver-host', 'storage-driver-db', 'storage-driver-table', 'storage-driver-secure', 'storage-driver-buffer-duration',
      ],
    },
  }),
};

/** What Kubernetes `version`'s minor removed; undefined when this table has no entry for it. */
export function removedInKubernetes(version: string): RemovedInMinor | undefined {
  const v = parseVersion(version);
  return v?.major === 1 ? REMOVED[v.minor] : undefined;
}

/**
 * What an upgrade from `from` to `to` meets: nothing within one minor (a patch release removes
 * nothing, and what its minor removed already stopped the running components), else the target
 * minor's list; undefined when this table has no entry for that minor.
 */
export function removedByUpgrade(from: string, to: string): RemovedInMinor | undefined {
  const a = parseVersion(from);
  const b = parseVersion(to);
  if (a && b && a.major === b.major && a.minor === b.minor) return none;
  return removedInKubernetes(to);
}

export const removesNothing = (r: RemovedInMinor): boolean =>
  r.featureGates.length === 0 && r.admissionPlugins.length === 0 && r.resources.length === 0 && Object.values(r.flags).every((f) => f.length === 0);

/** The minors this table knows, lowest first (for docs and tests). */
export const knownRemovalMinors = (): number[] => Object.keys(REMOVED).map(Number).sort((a, b) => a - b);

/**
 * The components whose arguments a machine's config sets: a control plane's config carries the
 * static pods' and (from it, the bootstrap manifests') kube-proxy's; a worker runs only its kubelet
 * from its own config.
 */
const COMPONENTS_OF: Record<'controlplane' | 'worker', readonly K8sComponent[]> = {
  controlplane: K8S_COMPONENTS,
  worker: ['kubelet'],
};

export interface RemovedUse {
  component: K8sComponent;
  kind: 'flag' | 'feature gate' | 'admission plugin';
  name: string;
  /** The config field it is set in, e.g. `machine.kubelet.extraArgs`. */
  field: string;
}

const describeRemovedUse = (u: RemovedUse): string => `${u.component} ${u.kind} ${u.kind === 'flag' ? `--${u.name}` : u.name} (${u.field})`;

const record = (v: unknown): Record<string, unknown> | undefined => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
/** An extraArgs value is one string or a list of them, each its own `--flag=value`. */
const argValues = (v: unknown): string[] => (typeof v === 'string' ? [v] : Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
const listItems = (values: string[]): string[] => values.flatMap((v) => v.split(',')).map((s) => s.trim()).filter(Boolean);

/** Uses in one machine's config documents of anything `gone` lists; empty when there are none. */
export function removedUsesInConfig(documents: ConfigDocument[], role: 'controlplane' | 'worker', gone: RemovedInMinor): RemovedUse[] {
  const v1 = documents.find(isV1Alpha1);
  if (!v1) return [];
  const gates = new Set(gone.featureGates);
  const uses: RemovedUse[] = [];
  for (const component of COMPONENTS_OF[role]) {
    const [top, key] = COMPONENT_SECTION[component];
    const section = record(record(v1[top])?.[key]);
    const args = record(section?.extraArgs) ?? {};
    const field = `${top}.${key}.extraArgs`;
    for (const [flag, value] of Object.entries(args)) {
      const name = flag.replace(/^-+/, '');
      if (gone.flags[component]?.includes(name)) uses.push({ component, kind: 'flag', name, field });
      if (name === 'feature-gates') {
        for (const item of listItems(argValues(value))) {
          const gate = item.split('=')[0]!.trim();
          if (gates.has(gate)) uses.push({ component, kind: 'feature gate', name: gate, field });
        }
      }
      if (name === 'enable-admission-plugins' && component === 'kube-apiserver') {
        for (const plugin of listItems(argValues(value))) if (gone.admissionPlugins.includes(plugin)) uses.push({ component, kind: 'admission plugin', name: plugin, field });
      }
    }
    if (component === 'kubelet') {
      for (const gate of Object.keys(record(record(section?.extraConfig)?.featureGates) ?? {})) {
        if (gates.has(gate)) uses.push({ component, kind: 'feature gate', name: gate, field: 'machine.kubelet.extraConfig.featureGates' });
      }
    }
  }
  return uses;
}

/** `workloads.v1alpha2.scheduling.k8s.io` → the path that lists its objects in every namespace. */
export function resourceListPath(resource: string): string {
  const [name, version, ...group] = resource.split('.');
  if (!name || !version) throw new Error(`not a resource.version.group: ${resource}`);
  return group.length ? `/apis/${group.join('.')}/${version}/${name}` : `/api/${version}/${name}`;
}

/**
 * What each machine's config uses that `gone` lists, one line per use naming every machine with
 * it (a cluster patch shows up on every machine), e.g.
 * `kubelet flag --boot-id-file (machine.kubelet.extraArgs) on cp1, w1`.
 */
export function removedUsesByMachine(machines: Array<{ name: string; role: 'controlplane' | 'worker'; documents: ConfigDocument[] }>, gone: RemovedInMinor): string[] {
  const on = new Map<string, string[]>();
  for (const m of machines) {
    for (const use of removedUsesInConfig(m.documents, m.role, gone)) {
      const line = describeRemovedUse(use);
      const names = on.get(line) ?? [];
      if (!names.includes(m.name)) names.push(m.name);
      on.set(line, names);
    }
  }
  return [...on].map(([line, names]) => `${line} on ${names.join(', ')}`);
}

/** The refusal an upgrade to `version` gets for `lines` (configs' uses, objects of removed APIs). */
export function removedRefusal(version: string, lines: string[]): string {
  const v = parseVersion(version);
  return `Kubernetes ${v ? `${v.major}.${v.minor}` : version} removes what the cluster still uses: ${lines.join('; ')}`;
}
