import type * as KubeCollect from './collect.ts';
import type { KubeSnapshot } from './types.ts';

export { parseReadyzFailing } from './readyz.ts';
export { KubeApiError, type KubeErrorCode } from './errors.ts';
export { parseQuantity, parseCpuCores, parseMemoryBytes } from './quantity.ts';
export type { CollectOptions, KubeNode, KubeNodeAddress, KubeNodeMetrics, KubeSnapshot } from './types.ts';

// @kubernetes/client-node adds ~56 MB to the process, and the runner needs it only in a collect
// pass or an upgrade, never to start or serve the API: it is loaded on first use.
let loading: Promise<typeof KubeCollect> | undefined;

/**
 * Loads the client now. Loading blocks the event loop for a while (seconds on a small, busy box),
 * so callers do it before starting calls that run against deadlines or leases.
 */
export function loadKubernetesClient(): Promise<typeof KubeCollect> {
  return (loading ??= import('./collect.ts'));
}

export async function collectKubernetes(kubeconfigYaml: string, opts: Parameters<typeof KubeCollect.collectKubernetes>[1]): Promise<KubeSnapshot> {
  const { collectKubernetes: collect } = await loadKubernetesClient();
  return collect(kubeconfigYaml, opts);
}
