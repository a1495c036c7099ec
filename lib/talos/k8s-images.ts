// Where each Kubernetes component's image lives in a Talos machine config, so a config can carry
// some components at another version than the rest: the steps of a Kubernetes upgrade, and the
// configs of an upgrade that stopped part-way.
import type { ConfigDocument } from './patch.ts';
import { isV1Alpha1 } from './schema.ts';

/** In upgrade order: the static pods, kube-proxy, then the kubelet (as `talosctl upgrade-k8s`). */
export const K8S_COMPONENTS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy', 'kubelet'] as const;
export type K8sComponent = (typeof K8S_COMPONENTS)[number];

export const isK8sComponent = (name: string): name is K8sComponent => (K8S_COMPONENTS as readonly string[]).includes(name);

/** Where the component's image is in the v1alpha1 document. */
const IMAGE_PATH: Record<K8sComponent, readonly [string, string, string]> = {
  'kube-apiserver': ['cluster', 'apiServer', 'image'],
  'kube-controller-manager': ['cluster', 'controllerManager', 'image'],
  'kube-scheduler': ['cluster', 'scheduler', 'image'],
  'kube-proxy': ['cluster', 'proxy', 'image'],
  kubelet: ['machine', 'kubelet', 'image'],
};

/** The image the documents give `component`; undefined where the role has none (a worker's static pods). */
export function componentImage(docs: ConfigDocument[], component: K8sComponent): string | undefined {
  const v1 = docs.find(isV1Alpha1);
  const [a, b, c] = IMAGE_PATH[component];
  const section = (v1?.[a] as Record<string, unknown> | undefined)?.[b] as Record<string, unknown> | undefined;
  const image = section?.[c];
  return typeof image === 'string' ? image : undefined;
}

/** Sets (or, with undefined, removes) the component's image in place. */
export function setComponentImage(docs: ConfigDocument[], component: K8sComponent, image: string | undefined): void {
  const v1 = docs.find(isV1Alpha1);
  if (!v1) return;
  const [a, b, c] = IMAGE_PATH[component];
  if (image === undefined) {
    // A section the other render lacks stays as this one has it, never an empty stub.
    const section = (v1[a] as Record<string, unknown> | undefined)?.[b] as Record<string, unknown> | undefined;
    if (section) delete section[c];
    return;
  }
  const top = (v1[a] ??= {}) as Record<string, unknown>;
  const section = (top[b] ??= {}) as Record<string, unknown>;
  section[c] = image;
}

/** Each component's image in `docs` replaced by the one the documents of `from` give it. */
export function takeComponentImages(docs: ConfigDocument[], components: Iterable<K8sComponent>, from: ConfigDocument[]): void {
  for (const c of components) setComponentImage(docs, c, componentImage(from, c));
}
