import type * as KubeCollect from './collect.ts';
import type { KubeSnapshot } from './types.ts';
import type { KubeTarget } from './kubeconfig.ts';

export { parseReadyzFailing } from './readyz.ts';
export { KubeApiError, pauseBeforeNextRead, retryAfterOf, type KubeErrorCode } from './errors.ts';
export type { KubeTarget } from './kubeconfig.ts';
export { parseQuantity, parseCpuCores, parseMemoryBytes } from './quantity.ts';
export type { CollectOptions, KubeNode, KubeNodeAddress, KubeNodeMetrics, KubeSnapshot } from './types.ts';

// The client is small now (lib/kube/http.ts over node:https, no generated library), but the
// runner still needs it only in a collect pass or an upgrade, never to start or serve the API, so
// it stays a chunk loaded on first use.
let loading: Promise<typeof KubeCollect> | undefined;

/**
 * Loads the client now. Callers do it before starting calls that run against deadlines or leases,
 * so even a slow first load (a busy box, a cold disk) is not charged to a request's budget.
 */
export function loadKubernetesClient(): Promise<typeof KubeCollect> {
  return (loading ??= import('./collect.ts'));
}

export async function collectKubernetes(kubeconfig: string | KubeTarget, opts: Parameters<typeof KubeCollect.collectKubernetes>[1]): Promise<KubeSnapshot> {
  const { collectKubernetes: collect } = await loadKubernetesClient();
  return collect(kubeconfig, opts);
}
