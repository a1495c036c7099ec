// Machine configs in the shape `talosctl gen config` (v1.13) writes: a v1alpha1 document plus HostnameConfig.
import { z } from 'zod';
import { stringifyConfigDocument } from './config-yaml.ts';
import { installerImage, VANILLA_SCHEMATIC } from './installer.ts';
import { multiDocIssues } from './multidoc-rules.ts';
import { applyPatch, parsePatch } from './patch.ts';
import type { ConfigDocument, PatchInput } from './patch.ts';
import { pemToBase64 } from './pem.ts';
import { validateDocuments } from './schema.ts';
import { clusterSecretsSchema } from './secrets.ts';
import type { ClusterSecrets } from './secrets.ts';
import {
  clusterNameSchema,
  endpointSchema,
  formatIssues,
  hostnameSchema,
  installDiskSchema,
  kubernetesVersionSchema,
  machineAddressSchema,
  parseEndpoint,
  schematicSchema,
  subnetsSchema,
  talosVersionSchema,
  zodIssues,
} from './validate.ts';
import type { FieldIssue } from './validate.ts';
import { compareVersions, DEFAULT_KUBERNETES_VERSION, DEFAULT_TALOS_VERSION } from './versions.ts';

export type MachineRole = 'controlplane' | 'worker';

export interface MachineConfigInput {
  secrets: ClusterSecrets;
  clusterName: string;
  /** `https://host:port`, e.g. `https://[2001:db8::1]:6443` */
  endpoint: string;
  role: MachineRole;
  talosVersion?: string;
  kubernetesVersion?: string;
  /** a fixed hostname; without it Talos derives a stable one (`HostnameConfig auto: stable`) */
  hostname?: string;
  installDisk: string;
  /** a full installer image reference; wins over `schematic` */
  installerImage?: string;
  /** Image Factory schematic id; defaults to the vanilla schematic */
  schematic?: string;
  /** Image Factory platform (`aws`, `oracle`, `hcloud`…) of the installer built from `schematic`; without it the generic (metal) one */
  platform?: string;
  /** IPs or DNS names the machine is reached at; they go into the certificate SANs */
  addresses?: string[];
  network?: { podSubnets?: string[]; serviceSubnets?: string[] };
  clusterPatches?: PatchInput[];
  machinePatches?: PatchInput[];
  /** Further multi-doc documents (e.g. the mesh's WireguardConfig), after HostnameConfig and before patches. */
  extraDocuments?: ConfigDocument[];
}

/** Invalid input or a patch that breaks the config; `issues` name the field, never its value. */
export class TalosConfigError extends Error {
  constructor(readonly issues: FieldIssue[]) {
    super(formatIssues(issues));
    this.name = 'TalosConfigError';
  }
}

export const MIN_TALOS_VERSION = 'v1.12.0'; // first release with the HostnameConfig document

const IMAGE_REF = /^[a-z0-9.-]+(:\d+)?(\/[a-z0-9._-]+)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$/;
const patchSchema = z.custom<PatchInput>((v) => typeof v === 'string' || (typeof v === 'object' && v !== null), {
  message: 'must be YAML/JSON text or an object',
});

const inputSchema = z.strictObject({
  secrets: clusterSecretsSchema,
  clusterName: clusterNameSchema,
  endpoint: endpointSchema,
  role: z.enum(['controlplane', 'worker'], { message: 'must be controlplane or worker' }),
  talosVersion: talosVersionSchema
    .refine((v) => compareVersions(v, MIN_TALOS_VERSION) >= 0, { message: `must be ${MIN_TALOS_VERSION} or later` })
    .default(DEFAULT_TALOS_VERSION),
  kubernetesVersion: kubernetesVersionSchema.default(DEFAULT_KUBERNETES_VERSION),
  hostname: hostnameSchema.optional(),
  installDisk: installDiskSchema,
  installerImage: z.string().regex(IMAGE_REF, 'must be an image reference such as registry/name:tag').optional(),
  schematic: schematicSchema.optional(),
  platform: z.string().regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, 'must be a lowercase platform name such as metal or aws').optional(),
  addresses: z.array(machineAddressSchema).max(64, 'must list at most 64 addresses').default([]),
  network: subnetsSchema.default({ podSubnets: ['10.244.0.0/16'], serviceSubnets: ['10.96.0.0/12'] }),
  clusterPatches: z.array(patchSchema).default([]),
  machinePatches: z.array(patchSchema).default([]),
  extraDocuments: z.array(z.custom<ConfigDocument>((v) => typeof v === 'object' && v !== null && !Array.isArray(v))).default([]),
});

type CheckedInput = z.output<typeof inputSchema>;

function checkInput(input: MachineConfigInput): CheckedInput {
  const result = inputSchema.safeParse(input);
  if (!result.success) throw new TalosConfigError(zodIssues(result.error));
  return result.data;
}

function b64Pair(certPem: string, keyPem: string): { crt: string; key: string } {
  return { crt: pemToBase64(certPem), key: keyPem === '' ? '' : pemToBase64(keyPem) };
}

/** Endpoint host first, then the machine's addresses in a fixed order, so the same set always renders the same. */
function certSans(endpointHost: string, addresses: string[]): string[] {
  const rest = [...new Set(addresses)].filter((a) => a !== endpointHost).sort();
  return [endpointHost, ...rest];
}

/** A fresh object for every config: the documents returned are the caller's to change. */
const podSecurityAdmission = () => ({
  name: 'PodSecurity',
  configuration: {
    apiVersion: 'pod-security.admission.config.k8s.io/v1alpha1',
    defaults: {
      audit: 'restricted',
      'audit-version': 'latest',
      enforce: 'baseline',
      'enforce-version': 'latest',
      warn: 'restricted',
      'warn-version': 'latest',
    },
    exemptions: { namespaces: ['kube-system'], runtimeClasses: [], usernames: [] },
    kind: 'PodSecurityConfiguration',
  },
});

function machineSection(input: CheckedInput, sans: string[]): ConfigDocument {
  const { secrets, role } = input;
  const controlPlane = role === 'controlplane';
  const image =
    input.installerImage ?? installerImage(input.schematic ?? VANILLA_SCHEMATIC, input.talosVersion, input.platform ? { platform: input.platform } : {});
  const machine: ConfigDocument = {
    type: role,
    token: secrets.trustdToken,
    ca: b64Pair(secrets.certs.os.certPem, controlPlane ? secrets.certs.os.keyPem : ''),
    certSANs: sans,
    kubelet: {
      image: `ghcr.io/siderolabs/kubelet:v${input.kubernetesVersion}`,
      defaultRuntimeSeccompProfileEnabled: true,
      disableManifestsDirectory: true,
    },
    install: { disk: input.installDisk, image, wipe: false, grubUseUKICmdline: true },
    features: {
      diskQuotaSupport: true,
      kubePrism: { enabled: true, port: 7445 },
      hostDNS: { enabled: true, forwardKubeDNSToHost: true },
    },
  };
  if (controlPlane) machine.nodeLabels = { 'node.kubernetes.io/exclude-from-external-load-balancers': '' };
  return machine;
}

function clusterSection(input: CheckedInput, sans: string[]): ConfigDocument {
  const { secrets } = input;
  const k8s = input.kubernetesVersion;
  const common: ConfigDocument = {
    id: secrets.cluster.id,
    secret: secrets.cluster.secret,
    controlPlane: { endpoint: input.endpoint },
    clusterName: input.clusterName,
    network: {
      dnsDomain: 'cluster.local',
      podSubnets: [...input.network.podSubnets],
      serviceSubnets: [...input.network.serviceSubnets],
    },
    token: secrets.bootstrapToken,
  };
  const discovery = { enabled: true, registries: { kubernetes: { disabled: true }, service: {} } };
  if (input.role === 'worker') {
    return { ...common, ca: b64Pair(secrets.certs.k8s.certPem, ''), discovery };
  }
  return {
    ...common,
    secretboxEncryptionSecret: secrets.secretboxEncryptionSecret,
    ca: b64Pair(secrets.certs.k8s.certPem, secrets.certs.k8s.keyPem),
    aggregatorCA: b64Pair(secrets.certs.k8sAggregator.certPem, secrets.certs.k8sAggregator.keyPem),
    serviceAccount: { key: pemToBase64(secrets.certs.k8sServiceAccount.keyPem) },
    apiServer: {
      image: `registry.k8s.io/kube-apiserver:v${k8s}`,
      certSANs: [...sans],
      admissionControl: [podSecurityAdmission()],
      auditPolicy: { apiVersion: 'audit.k8s.io/v1', kind: 'Policy', rules: [{ level: 'Metadata' }] },
    },
    controllerManager: { image: `registry.k8s.io/kube-controller-manager:v${k8s}` },
    proxy: { image: `registry.k8s.io/kube-proxy:v${k8s}` },
    scheduler: { image: `registry.k8s.io/kube-scheduler:v${k8s}` },
    discovery,
    etcd: { ca: b64Pair(secrets.certs.etcd.certPem, secrets.certs.etcd.keyPem) },
  };
}

/** The config documents before patches, already checked. */
function baseDocuments(input: CheckedInput): ConfigDocument[] {
  const endpointHost = (parseEndpoint(input.endpoint) as { host: string }).host;
  const sans = certSans(endpointHost, input.addresses);
  const v1alpha1: ConfigDocument = {
    version: 'v1alpha1',
    debug: false,
    // upstream always writes it; Talos refuses only `false`
    persist: true,
    machine: machineSection(input, sans),
    cluster: clusterSection(input, sans),
  };
  const hostname: ConfigDocument = input.hostname
    ? { apiVersion: 'v1alpha1', kind: 'HostnameConfig', hostname: input.hostname }
    : { apiVersion: 'v1alpha1', kind: 'HostnameConfig', auto: 'stable' };
  return [v1alpha1, hostname, ...input.extraDocuments.map((d) => structuredClone(d))];
}

function assertWithoutIssues(docs: ConfigDocument[], role: MachineRole): FieldIssue[] {
  return [...validateDocuments(docs), ...semanticIssues(docs, role), ...multiDocIssues(docs)];
}

// The Go-side rules the schema cannot express (v1alpha1_validation.go) that a patch could break.
function semanticIssues(docs: ConfigDocument[], role: MachineRole): FieldIssue[] {
  const v1 = docs.find((d) => d.kind === undefined);
  const issues: FieldIssue[] = [];
  const get = (path: string): unknown =>
    path.split('.').reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], v1);
  if (get('machine.type') !== role) issues.push({ path: 'machine.type', message: `must stay ${role}` });
  if (typeof get('cluster.controlPlane.endpoint') !== 'string') {
    issues.push({ path: 'cluster.controlPlane.endpoint', message: 'is required' });
  }
  if (get('machine.install.disk') === undefined && get('machine.install.diskSelector') === undefined) {
    issues.push({ path: 'machine.install.disk', message: 'is required (or machine.install.diskSelector)' });
  }
  if (role === 'controlplane' && !get('machine.ca.key')) {
    issues.push({ path: 'machine.ca.key', message: 'is required on control-plane nodes' });
  }
  if (role === 'worker') {
    if (get('machine.ca.key')) issues.push({ path: 'machine.ca.key', message: 'must be empty on workers' });
    if (get('cluster.ca.key')) issues.push({ path: 'cluster.ca.key', message: 'must be empty on workers' });
    if (get('cluster.etcd') !== undefined) issues.push({ path: 'cluster.etcd', message: 'is not allowed on workers' });
  }
  return issues;
}

/** Builds, patches (cluster patches, then machine patches) and validates the config documents. */
export function buildMachineDocuments(input: MachineConfigInput): ConfigDocument[] {
  const checked = checkInput(input);
  const patches = [
    ...checked.clusterPatches.map((p, i) => ({ source: `clusterPatches[${i}]`, patch: p })),
    ...checked.machinePatches.map((p, i) => ({ source: `machinePatches[${i}]`, patch: p })),
  ];
  const steps: ConfigDocument[][] = [baseDocuments(checked)];
  for (const { source, patch } of patches) {
    try {
      steps.push(applyPatch(steps[steps.length - 1] as ConfigDocument[], parsePatch(patch, source), source));
    } catch (error) {
      throw new TalosConfigError([{ path: source, message: (error as Error).message.replace(`${source}: `, '') }]);
    }
  }
  const final = steps[steps.length - 1] as ConfigDocument[];
  const issues = assertWithoutIssues(final, checked.role);
  if (issues.length > 0) {
    // Name the first patch whose result breaks the config, so the user knows which one to fix;
    // none when the config is broken before any patch (extra documents clashing with ours).
    const baseBroken = assertWithoutIssues(steps[0] as ConfigDocument[], checked.role).length > 0;
    const culprit = baseBroken ? -1 : patches.findIndex((_, i) => assertWithoutIssues(steps[i + 1] as ConfigDocument[], checked.role).length > 0);
    const source = culprit === -1 ? undefined : patches[culprit]?.source;
    throw new TalosConfigError(source ? issues.map((i) => ({ ...i, message: `${i.message} (after ${source})` })) : issues);
  }
  return final;
}

export function stringifyDocuments(docs: ConfigDocument[]): string {
  // No line folding and no YAML anchors: Talos should read exactly what a person sees.
  return docs.map(stringifyConfigDocument).join('---\n');
}

/** The machine config YAML for one node; the same inputs always give the same bytes. */
export function renderMachineConfig(input: MachineConfigInput): string {
  return stringifyDocuments(buildMachineDocuments(input));
}
