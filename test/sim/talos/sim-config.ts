import { CORE_SCHEMA, loadAll, YAMLException } from 'js-yaml';

/** What the simulator needs out of a received machine config. */
export interface SimMachineConfig {
  type: 'controlplane' | 'worker';
  hostname: string | undefined;
  caCertPem: string | undefined;
  caKeyPem: string | undefined;
  certSANs: string[];
  installImage: string | undefined;
  /** The Kubernetes component images the config names (static pods, kube-proxy, kubelet). */
  images: SimKubernetesImages;
  /** What a control plane renders its bootstrap manifests from (kube-proxy's image: images.proxy). */
  cluster: SimClusterConfig;
  features: SimMachineFeatures;
  /** The config as it was applied, every document: a node keeps these bytes (its MachineConfig resource shows them). */
  source: string;
}

export interface SimClusterConfig {
  endpoint: string | undefined;
  /** cluster.token, `<id>.<secret>`: the kubelet bootstrap token, a secret. */
  token: string | undefined;
  proxyDisabled: boolean;
  coreDNS: { image: string | undefined; disabled: boolean };
  /** cluster.network.cni.name as written; absent is Talos's default, flannel. */
  cniName: string | undefined;
  dnsDomain: string | undefined;
  podSubnets: string[];
  serviceSubnets: string[];
  inlineManifests: Array<{ name: string; contents: string }>;
}

export interface SimMachineFeatures {
  /** machine.features.kubePrism: in-cluster clients reach the API server through it when enabled. */
  kubePrism: { enabled: boolean; port: number | undefined };
  kubernetesTalosAPIAccess: boolean;
}

export interface SimKubernetesImages {
  apiServer?: string;
  controllerManager?: string;
  scheduler?: string;
  proxy?: string;
  kubelet?: string;
}

export class SimConfigError extends Error {}

type Doc = Record<string, unknown>;

function asObj(v: unknown): Doc | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Doc) : undefined;
}

function decodeB64Pem(v: unknown): string | undefined {
  if (typeof v !== 'string' || v === '') return undefined;
  const text = Buffer.from(v, 'base64').toString('utf8');
  if (!text.includes('-----BEGIN')) throw new SimConfigError('machine.ca: not base64 of PEM');
  return text;
}

interface ParsedConfig {
  v1alpha1: SimMachineConfig | undefined;
}

const parsed = new Map<string, ParsedConfig | SimConfigError>();

/**
 * Parses a multi-document Talos config like the decoder does: at most one v1alpha1 document.
 * A node sees the same bytes several times (dry run, apply, staged); the result is kept frozen
 * for a handful of recent configs, so callers share it but cannot change it.
 */
export function parseSimConfig(data: Uint8Array): ParsedConfig {
  const text = Buffer.from(data).toString('utf8');
  let result = parsed.get(text);
  if (result === undefined) {
    try {
      result = freeze(parseText(text));
    } catch (err) {
      if (!(err instanceof SimConfigError)) throw err;
      result = err;
    }
    if (parsed.size >= 128) parsed.delete(parsed.keys().next().value!);
    parsed.set(text, result);
  }
  if (result instanceof SimConfigError) throw new SimConfigError(result.message);
  return result;
}

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object') {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

function freeze(p: ParsedConfig): ParsedConfig {
  if (p.v1alpha1) deepFreeze(p.v1alpha1);
  return Object.freeze(p);
}

const optString = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const stringList = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

function parseCluster(cluster: Doc): SimClusterConfig {
  const network = asObj(cluster['network']) ?? {};
  const coreDNS = asObj(cluster['coreDNS']) ?? {};
  const inline = Array.isArray(cluster['inlineManifests']) ? cluster['inlineManifests'] : [];
  return {
    endpoint: optString(asObj(cluster['controlPlane'])?.['endpoint']),
    token: optString(cluster['token']),
    proxyDisabled: asObj(cluster['proxy'])?.['disabled'] === true,
    coreDNS: { image: optString(coreDNS['image']), disabled: coreDNS['disabled'] === true },
    cniName: optString(asObj(network['cni'])?.['name']),
    dnsDomain: optString(network['dnsDomain']),
    podSubnets: stringList(network['podSubnets']),
    serviceSubnets: stringList(network['serviceSubnets']),
    // An entry without a name is one Talos's validation rejects; the sim just leaves it out.
    inlineManifests: inline.flatMap((m) => {
      const o = asObj(m);
      const name = optString(o?.['name']);
      return name ? [{ name, contents: typeof o?.['contents'] === 'string' ? o['contents'] : '' }] : [];
    }),
  };
}

function parseFeatures(machine: Doc): SimMachineFeatures {
  const features = asObj(machine['features']) ?? {};
  const prism = asObj(features['kubePrism']) ?? {};
  const port = prism['port'];
  return {
    kubePrism: { enabled: prism['enabled'] === true, port: typeof port === 'number' && port > 0 ? port : undefined },
    kubernetesTalosAPIAccess: asObj(features['kubernetesTalosAPIAccess'])?.['enabled'] === true,
  };
}

function parseText(text: string): ParsedConfig {
  let docs: unknown[];
  try {
    // js-yaml's core schema reads YAML 1.2 like the decoder (no timestamps, no merge keys) and is
    // several times cheaper than a full document model, which a fleet of sims parses per push.
    docs = loadAll(text, null, { schema: CORE_SCHEMA });
  } catch (err) {
    // The reason only: the message quotes the source, which may carry the config's secrets.
    if (err instanceof YAMLException) throw new SimConfigError(`failed to parse config: ${err.reason}`);
    throw err;
  }
  let v1: Doc | undefined;
  let hostname: string | undefined;
  for (const d of docs) {
    const o = asObj(d);
    if (!o) continue;
    const isV1 = o['version'] === 'v1alpha1' || 'machine' in o || 'cluster' in o;
    if (isV1) {
      if (v1) throw new SimConfigError('duplicate v1alpha1.Config');
      v1 = o;
      continue;
    }
    if (typeof o['kind'] !== 'string') throw new SimConfigError('missing kind');
    if (typeof o['apiVersion'] !== 'string') throw new SimConfigError('missing apiVersion');
    if (o['kind'] === 'HostnameConfig' && typeof o['hostname'] === 'string') hostname = o['hostname'];
  }
  if (!v1) return { v1alpha1: undefined };
  const machine = asObj(v1['machine']) ?? {};
  const ca = asObj(machine['ca']) ?? {};
  const network = asObj(machine['network']) ?? {};
  const install = asObj(machine['install']) ?? {};
  const cluster = asObj(v1['cluster']) ?? {};
  const imageAt = (section: Doc, key: string): string | undefined => {
    const image = asObj(section[key])?.['image'];
    return typeof image === 'string' ? image : undefined;
  };
  const images: SimKubernetesImages = {};
  for (const [name, value] of Object.entries({
    apiServer: imageAt(cluster, 'apiServer'),
    controllerManager: imageAt(cluster, 'controllerManager'),
    scheduler: imageAt(cluster, 'scheduler'),
    proxy: imageAt(cluster, 'proxy'),
    kubelet: imageAt(machine, 'kubelet'),
  })) {
    if (value !== undefined) images[name as keyof SimKubernetesImages] = value;
  }
  const t = machine['type'];
  const type = t === 'controlplane' || t === 'init' ? 'controlplane' : 'worker';
  return {
    v1alpha1: {
      type,
      hostname: hostname ?? (typeof network['hostname'] === 'string' ? network['hostname'] : undefined),
      caCertPem: decodeB64Pem(ca['crt']),
      caKeyPem: decodeB64Pem(ca['key']),
      certSANs: Array.isArray(machine['certSANs']) ? machine['certSANs'].map(String) : [],
      installImage: typeof install['image'] === 'string' ? install['image'] : undefined,
      images,
      cluster: parseCluster(cluster),
      features: parseFeatures(machine),
      source: text,
    },
  };
}
