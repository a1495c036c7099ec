// Where each Kubernetes component's image lives in a Talos machine config, so a config can carry
// some components at another version than the rest: the steps of a Kubernetes upgrade, and the
// configs of an upgrade that stopped part-way.
import type { ConfigDocument } from './patch.ts';
import { isV1Alpha1 } from './schema.ts';

/** In upgrade order: the static pods, kube-proxy, then the kubelet (as `talosctl upgrade-k8s`). */
export const K8S_COMPONENTS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy', 'kubelet'] as const;
export type K8sComponent = (typeof K8S_COMPONENTS)[number];

export const isK8sComponent = (name: string): name is K8sComponent => (K8S_COMPONENTS as readonly string[]).includes(name);

/** Where each component's section (its `image`, `extraArgs`, …) is in the v1alpha1 document. */
export const COMPONENT_SECTION: Readonly<Record<K8sComponent, readonly [string, string]>> = {
  'kube-apiserver': ['cluster', 'apiServer'],
  'kube-controller-manager': ['cluster', 'controllerManager'],
  'kube-scheduler': ['cluster', 'scheduler'],
  'kube-proxy': ['cluster', 'proxy'],
  kubelet: ['machine', 'kubelet'],
};

function section(v1: ConfigDocument | undefined, component: K8sComponent): Record<string, unknown> | undefined {
  const [top, key] = COMPONENT_SECTION[component];
  return (v1?.[top] as Record<string, unknown> | undefined)?.[key] as Record<string, unknown> | undefined;
}

/** The image the documents give `component`; undefined where the role has none (a worker's static pods). */
export function componentImage(docs: ConfigDocument[], component: K8sComponent): string | undefined {
  const image = section(docs.find(isV1Alpha1), component)?.['image'];
  return typeof image === 'string' ? image : undefined;
}

/** Sets (or, with undefined, removes) the component's image in place. */
export function setComponentImage(docs: ConfigDocument[], component: K8sComponent, image: string | undefined): void {
  const v1 = docs.find(isV1Alpha1);
  if (!v1) return;
  if (image === undefined) {
    // A section the other render lacks stays as this one has it, never an empty stub.
    const s = section(v1, component);
    if (s) delete s['image'];
    return;
  }
  const [top, key] = COMPONENT_SECTION[component];
  const parent = (v1[top] ??= {}) as Record<string, unknown>;
  ((parent[key] ??= {}) as Record<string, unknown>)['image'] = image;
}

/** Each component's image in `docs` replaced by the one the documents of `from` give it. */
export function takeComponentImages(docs: ConfigDocument[], components: Iterable<K8sComponent>, from: ConfigDocument[]): void {
  for (const c of components) setComponentImage(docs, c, componentImage(from, c));
}
