// The shapes the API answers with (functions/*/routes.ts `public*`), as far as the CLI reads them.

export interface Tenant {
  id: string;
  name: string;
  createdAt: number;
}

export type Patch = string | Record<string, unknown>;

export interface Cluster {
  id: string;
  tenant: string;
  name: string;
  talosVersion: string;
  kubernetesVersion: string;
  endpoint: string;
  settings: {
    schematic?: string;
    installerImage?: string;
    installDisk?: string;
    podSubnets?: string[];
    serviceSubnets?: string[];
    patches?: Patch[];
    providerSettings?: Record<string, Record<string, unknown>>;
  };
  bootstrapped: boolean;
  bootstrappedAt: number | null;
  createdAt: number;
  updatedAt: number;
}

export interface Machine {
  id: string;
  cluster: string;
  name: string;
  role: 'controlplane' | 'worker';
  provider: string;
  address: string | null;
  installDisk: string | null;
  patches: Patch[];
  state: string;
  talosVersion: string | null;
  ipv4: string | null;
  ipv6: string | null;
  createdAt: number;
  updatedAt: number;
}

export type RunState = 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled' | 'interrupted';

export interface Run {
  id: string;
  kind: string;
  tenant: string | null;
  cluster: string | null;
  state: RunState;
  params: Record<string, unknown> | null;
  result: Record<string, unknown> | null;
  error: string | null;
  cancelRequested: boolean;
  attempt: number;
  createdBy: string | null;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
}

export interface RunEvent {
  seq: number;
  at?: number;
  type: string;
  level?: string;
  message: string;
  data?: Record<string, unknown> | null;
}

export const TERMINAL: readonly RunState[] = ['succeeded', 'failed', 'canceled', 'interrupted'];

/** The sync's inventory policies the API takes (functions/manifests/job.ts), offered as the flag's choices. */
export const INVENTORY_POLICIES = ['AdoptIfNoInventory', 'MustMatch', 'AdoptAll'] as const;
