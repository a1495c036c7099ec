import type { CollectOptions, KubeSnapshot } from './types.ts';

export { parseReadyzFailing } from './readyz.ts';
export { KubeApiError, type KubeErrorCode } from './errors.ts';
export { parseQuantity, parseCpuCores, parseMemoryBytes } from './quantity.ts';
export type { CollectOptions, KubeNode, KubeNodeAddress, KubeNodeMetrics, KubeSnapshot } from './types.ts';

/**
 * Loads the client on first use: @kubernetes/client-node adds ~56 MB to the process, and the
 * runner needs it only in a collect pass or an upgrade, never to start or serve the API.
 */
export async function collectKubernetes(kubeconfigYaml: string, opts: CollectOptions): Promise<KubeSnapshot> {
  const { collectKubernetes: collect } = await import('./collect.ts');
  return collect(kubeconfigYaml, opts);
}
