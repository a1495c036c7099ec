// Pure decisions of a Kubernetes upgrade: the components in the order they move, where each one's
// image lives in the machine config, and the config a node gets at each step.
import { parseAllDocuments } from 'yaml';
import { stringifyDocuments } from '../../lib/talos/config.ts';
import { isV1Alpha1 } from '../../lib/talos/schema.ts';
import type { ConfigDocument } from '../../lib/talos/patch.ts';

/** In upgrade order: the static pods, kube-proxy, then the kubelet (as `talosctl upgrade-k8s`). */
export const K8S_COMPONENTS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy', 'kubelet'] as const;
export type K8sComponent = (typeof K8S_COMPONENTS)[number];
export const STATIC_PODS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const satisfies readonly K8sComponent[];

/** Where the component's image is in the v1alpha1 document. */
const IMAGE_PATH: Record<K8sComponent, readonly [string, string, string]> = {
  'kube-apiserver': ['cluster', 'apiServer', 'image'],
  'kube-controller-manager': ['cluster', 'controllerManager', 'image'],
  'kube-scheduler': ['cluster', 'scheduler', 'image'],
  'kube-proxy': ['cluster', 'proxy', 'image'],
  kubelet: ['machine', 'kubelet', 'image'],
};

/** A rendered config's documents. */
export function parseDocuments(yaml: string): ConfigDocument[] {
  return parseAllDocuments(yaml).map((d) => {
    if (d.errors.length) throw new Error(`rendered config does not parse: ${d.errors[0]!.message}`);
    return d.toJS() as ConfigDocument;
  });
}

function getImage(docs: ConfigDocument[], component: K8sComponent): string | undefined {
  const v1 = docs.find(isV1Alpha1);
  const [a, b, c] = IMAGE_PATH[component];
  const section = (v1?.[a] as Record<string, unknown> | undefined)?.[b] as Record<string, unknown> | undefined;
  const image = section?.[c];
  return typeof image === 'string' ? image : undefined;
}

function setImage(docs: ConfigDocument[], component: K8sComponent, image: string | undefined): void {
  const v1 = docs.find(isV1Alpha1);
  if (!v1) return;
  const [a, b, c] = IMAGE_PATH[component];
  if (image === undefined) {
    // A section the old render lacks stays as the new one has it, never an empty stub.
    const section = (v1[a] as Record<string, unknown> | undefined)?.[b] as Record<string, unknown> | undefined;
    if (section) delete section[c];
    return;
  }
  const top = (v1[a] ??= {}) as Record<string, unknown>;
  const section = (top[b] ??= {}) as Record<string, unknown>;
  section[c] = image;
}

/** The image a rendered config gives `component`; undefined where the role has none (a worker's static pods). */
export function configImage(yaml: string, component: K8sComponent): string | undefined {
  return getImage(parseDocuments(yaml), component);
}

/**
 * The config a node gets when `upTo` moves: the config rendered at the new version, with the
 * images of every component after `upTo` kept as the old render has them. Both renders carry the
 * cluster's and machine's patches, so a patched image (a mirror registry) stays patched.
 */
export function stepConfig(oldYaml: string, newYaml: string, upTo: K8sComponent): string {
  const oldDocs = parseDocuments(oldYaml);
  const docs = parseDocuments(newYaml);
  for (const later of K8S_COMPONENTS.slice(K8S_COMPONENTS.indexOf(upTo) + 1)) setImage(docs, later, getImage(oldDocs, later));
  return stringifyDocuments(docs);
}

