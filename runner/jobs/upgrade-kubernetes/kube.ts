// The Kubernetes reads and the one write a Kubernetes upgrade needs: a control plane's static pod
// (by its `k8s-app` label and node, as talosctl's checkPodStatus), a node's kubelet version, the
// kube-proxy DaemonSet, and how many objects an API the target removes still holds.
import { errorMessage } from '../../../lib/errors.ts';
import { RunError } from '../../../lib/jobs/executor.ts';
import { expectOk, getIfExists, type KubeWriter } from '../../../lib/kube/drain.ts';

const NS = 'kube-system';

/** A read the run cannot go on without: a failure ends the run naming it (the run's own reason when it was stopped). */
export async function readKubeState<T>(hard: AbortSignal, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    hard.throwIfAborted();
    throw new RunError(`cannot read the cluster's Kubernetes state: ${errorMessage(err)}`);
  }
}

export interface PodView {
  name: string;
  image: string | undefined;
  ready: boolean;
}

export interface NodeView {
  kubeletVersion: string;
  ready: boolean;
}

export interface DaemonSetView {
  image: string | undefined;
  /** The controller has seen the last spec change and every scheduled pod runs it and is available. */
  rolledOut: boolean;
  desired: number;
  updated: number;
  available: number;
}

interface Condition {
  type?: string;
  status?: string;
}
interface Container {
  name?: string;
  image?: string;
}

const isTrue = (conditions: Condition[] | undefined, type: string): boolean => (conditions ?? []).some((c) => c.type === type && c.status === 'True');
const imageOf = (containers: Container[] | undefined, name: string): string | undefined => (containers?.find((c) => c.name === name) ?? containers?.[0])?.image;

/** The `component` static pod on `node`, undefined while it has none. */
export async function staticPod(w: KubeWriter, component: string, node: string, signal: AbortSignal): Promise<PodView | undefined> {
  const body = (await getIfExists(w, `/api/v1/namespaces/${NS}/pods?labelSelector=${encodeURIComponent(`k8s-app=${component}`)}`, signal)) as
    | { items?: Array<{ metadata?: { name?: string }; spec?: { nodeName?: string; containers?: Container[] }; status?: { conditions?: Condition[] } }> }
    | undefined;
  const pod = body?.items?.find((p) => p.spec?.nodeName === node);
  if (!pod) return undefined;
  return { name: pod.metadata?.name ?? component, image: imageOf(pod.spec?.containers, component), ready: isTrue(pod.status?.conditions, 'Ready') };
}

export async function kubeNode(w: KubeWriter, node: string, signal: AbortSignal): Promise<NodeView | undefined> {
  const body = (await getIfExists(w, `/api/v1/nodes/${encodeURIComponent(node)}`, signal)) as
    | { status?: { nodeInfo?: { kubeletVersion?: string }; conditions?: Condition[] } }
    | undefined;
  if (!body) return undefined;
  return { kubeletVersion: body.status?.nodeInfo?.kubeletVersion ?? '', ready: isTrue(body.status?.conditions, 'Ready') };
}

const PROXY_PATH = `/apis/apps/v1/namespaces/${NS}/daemonsets/kube-proxy`;

/** The kube-proxy DaemonSet Talos deploys; undefined when the cluster runs without it. */
export async function kubeProxy(w: KubeWriter, signal: AbortSignal): Promise<DaemonSetView | undefined> {
  const body = (await getIfExists(w, PROXY_PATH, signal)) as
    | {
        metadata?: { generation?: number };
        spec?: { template?: { spec?: { containers?: Container[] } } };
        status?: { observedGeneration?: number; desiredNumberScheduled?: number; updatedNumberScheduled?: number; numberAvailable?: number };
      }
    | undefined;
  if (!body) return undefined;
  const s = body.status ?? {};
  const desired = s.desiredNumberScheduled ?? 0;
  const updated = s.updatedNumberScheduled ?? 0;
  const available = s.numberAvailable ?? 0;
  return {
    image: imageOf(body.spec?.template?.spec?.containers, 'kube-proxy'),
    rolledOut: (s.observedGeneration ?? 0) >= (body.metadata?.generation ?? 0) && updated === desired && available === desired,
    desired,
    updated,
    available,
  };
}

/**
 * Sets the kube-proxy container's image with a strategic merge patch: Talos applies its bootstrap
 * manifests only when a cluster is created, so a new `cluster.proxy.image` reaches the DaemonSet
 * this way, as talosctl's kube-proxy step does. The manifest sync at the end of the upgrade
 * (runner/jobs/manifests) then applies the whole DaemonSet as Talos renders it.
 */
export async function setKubeProxyImage(w: KubeWriter, image: string, signal: AbortSignal): Promise<void> {
  const body = { spec: { template: { spec: { containers: [{ name: 'kube-proxy', image }] } } } };
  await expectOk(w, 'PATCH', PROXY_PATH, { body, contentType: 'application/strategic-merge-patch+json', signal });
}

/** How many objects `path` lists (every namespace); undefined when the server does not serve it (404). */
export async function countObjects(w: KubeWriter, path: string, signal: AbortSignal): Promise<number | undefined> {
  const body = (await getIfExists(w, path, signal)) as { items?: unknown[] } | undefined;
  return body ? (body.items ?? []).length : undefined;
}
