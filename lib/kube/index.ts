export { collectKubernetes, parseReadyzFailing } from './collect.ts';
export { KubeApiError, type KubeErrorCode } from './errors.ts';
export { parseQuantity, parseCpuCores, parseMemoryBytes } from './quantity.ts';
export type { CollectOptions, KubeNode, KubeNodeAddress, KubeNodeMetrics, KubeSnapshot } from './types.ts';
