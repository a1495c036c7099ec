// Ties a kube sim to Talos sims the way a real node ties its config to Kubernetes: a control
// plane's config images become its static pods (kube-system, label k8s-app, named
// `<component>-<node>`), and a node's kubelet image becomes the version its Node reports. A
// config that changes an image restarts that component: it comes back on the new image not Ready,
// then Ready after `restartMs`, unless the test stalled it. `/version` answers with the oldest
// kube-apiserver that runs, as a client behind the cluster's endpoint may reach any of them.
import type { SimTalosNode } from '../talos/index.ts';
import type { SimKubernetesImages } from '../talos/sim-config.ts';
import type { KubeSim } from './server.ts';
import { compareVersions } from '../../../lib/talos/versions.ts';

export type LinkedComponent = 'kube-apiserver' | 'kube-controller-manager' | 'kube-scheduler' | 'kubelet';

const STATIC: Array<[Exclude<LinkedComponent, 'kubelet'>, keyof SimKubernetesImages]> = [
  ['kube-apiserver', 'apiServer'],
  ['kube-controller-manager', 'controllerManager'],
  ['kube-scheduler', 'scheduler'],
];

export interface KubeTalosLink {
  /** `node`'s `component` never becomes Ready again after its next restart (or now, if it runs the latest image already). */
  stall(node: string, component: LinkedComponent): void;
  unstall(node: string, component: LinkedComponent): void;
  stop(): void;
}

const tagOf = (image: string): string => {
  const noDigest = image.split('@')[0]!;
  return noDigest.slice(noDigest.lastIndexOf(':') + 1);
};

export function linkKubeToTalos(kube: KubeSim, sims: Map<string, SimTalosNode>, opts: { restartMs?: number } = {}): KubeTalosLink {
  const restartMs = opts.restartMs ?? 30;
  const stalled = new Set<string>();
  const running = new Map<string, string>();
  const apiServers = new Map<string, string>();
  const timers = new Set<NodeJS.Timeout>();
  const key = (node: string, c: LinkedComponent): string => `${node}/${c}`;

  const show = (node: string, c: LinkedComponent, image: string, ready: boolean): void => {
    if (c === 'kubelet') return kube.setNode(node, { kubeletVersion: tagOf(image), ready });
    if (c === 'kube-apiserver') {
      apiServers.set(node, tagOf(image));
      kube.setVersion([...apiServers.values()].sort(compareVersions)[0]!);
    }
    kube.setPod({ namespace: 'kube-system', name: `${c}-${node}`, nodeName: node, labels: { 'k8s-app': c, tier: 'control-plane' }, mirror: true, container: c, image, ready });
  };
  const run = (node: string, c: LinkedComponent, image: string | undefined): void => {
    if (!image) return;
    const k = key(node, c);
    if (running.get(k) === image) return;
    const first = !running.has(k);
    running.set(k, image);
    if (first) return show(node, c, image, !stalled.has(k));
    show(node, c, image, false);
    const t = setTimeout(() => {
      timers.delete(t);
      if (running.get(k) === image && !stalled.has(k)) show(node, c, image, true);
    }, restartMs);
    timers.add(t);
  };

  const offs: Array<() => void> = [];
  for (const [node, sim] of sims) {
    const apply = (images: SimKubernetesImages, controlPlane: boolean): void => {
      if (controlPlane) for (const [c, field] of STATIC) run(node, c, images[field]);
      run(node, 'kubelet', images.kubelet);
    };
    if (sim.config) apply(sim.config.images, sim.config.type === 'controlplane');
    offs.push(sim.onConfig((cfg) => apply(cfg.images, cfg.type === 'controlplane')));
  }
  // Talos deploys kube-proxy from the first control plane's config when the cluster bootstraps.
  const proxy = [...sims.values()].find((s) => s.config?.type === 'controlplane')?.config?.images.proxy;
  if (proxy) kube.setDaemonSet({ namespace: 'kube-system', name: 'kube-proxy', container: 'kube-proxy', image: proxy, desired: sims.size, labels: { 'k8s-app': 'kube-proxy', tier: 'node' } });

  return {
    stall: (node, c) => {
      stalled.add(key(node, c));
    },
    unstall: (node, c) => {
      const k = key(node, c);
      stalled.delete(k);
      const image = running.get(k);
      if (image) show(node, c, image, true);
    },
    stop: () => {
      for (const off of offs) off();
      for (const t of timers) clearTimeout(t);
      timers.clear();
    },
  };
}
