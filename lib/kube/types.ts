// What one Kubernetes collection pass reports about a cluster. Plain JSON-safe data, so it can be
// stored as-is and fed to the pure assessment in functions/collect.

export interface KubeNodeAddress {
  type: string; // InternalIP, ExternalIP, Hostname, ...
  address: string;
}

export interface KubeNode {
  name: string;
  /** status of the Ready condition; 'Unknown' also when the condition is missing. */
  ready: 'True' | 'False' | 'Unknown';
  /** ISO time the Ready condition last changed, or null when absent. */
  readySince: string | null;
  kubeletVersion: string;
  addresses: KubeNodeAddress[];
  unschedulable: boolean;
  /** From node-role.kubernetes.io/<role> labels, e.g. ["control-plane"]. */
  roles: string[];
  /** Condition types other than Ready that are True (MemoryPressure, DiskPressure, PIDPressure, NetworkUnavailable). */
  pressure: string[];
  capacity: { cpuCores: number; memoryBytes: number } | null;
}

export interface KubeNodeMetrics {
  name: string;
  cpuCores: number;
  memoryBytes: number;
  /** ISO time of the metrics-server sample. */
  timestamp: string | null;
}

export interface KubeSnapshot {
  /** API server URL, without any credentials. */
  server: string;
  collectedAt: string;
  version: { gitVersion: string; major: string; minor: string; platform: string };
  readyz: { ok: boolean; failing: string[] };
  nodes: KubeNode[];
  /** null when the metrics API is not installed (absent from discovery or 404) or not answering. */
  metrics: KubeNodeMetrics[] | null;
  /** Why metrics are null although metrics.k8s.io is registered (e.g. metrics-server down, 503). */
  metricsError?: string;
}

export interface CollectOptions {
  /** Time budget in milliseconds for the whole collection; every request gets what is left of it. */
  deadlineMs: number;
  /** Aborts the collection early (reported as code 'deadline'). */
  signal?: AbortSignal;
}

// The API server's answers, reduced to the fields read here; everything is optional because a
// server may omit any of it.

export interface VersionInfo {
  gitVersion?: string;
  major?: string;
  minor?: string;
  platform?: string;
}

export interface APIGroupList {
  groups?: Array<{ name?: string }>;
}

export interface NodeCondition {
  type?: string;
  status?: string;
  lastTransitionTime?: string;
}

export interface NodeObject {
  metadata?: { name?: string; labels?: Record<string, string> };
  spec?: { unschedulable?: boolean };
  status?: {
    conditions?: NodeCondition[];
    addresses?: Array<{ type?: string; address?: string }>;
    capacity?: { cpu?: string; memory?: string };
    nodeInfo?: { kubeletVersion?: string };
  };
}

export interface NodeList {
  items?: NodeObject[];
}
