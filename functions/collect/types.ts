// Inputs and outputs of the pure health assessment. The inputs are what one collect pass gathered:
// per machine, the Talos API results (camelCase, as the Talos client decodes them), and for the
// cluster, the Kubernetes snapshot. A call that failed is `{ error: { code, message } }` instead.
import type { KubeSnapshot } from '../../lib/kube/types.ts';

/** uint64 proto fields may arrive as numbers or as decimal strings (longs: String). */
export type Uint64 = number | string;

export interface CallError {
  code: string;
  message: string;
}
export interface Failed {
  error: CallError;
}

/** MachineService.Version → version. */
export interface TalosVersion {
  tag: string;
}

/** MachineService.ServiceList → services[]. `health.unknown` means the service has no health check. */
export interface TalosService {
  id: string;
  state: string; // Running, Finished, Waiting, Preparing, Failed, ...
  health?: { healthy?: boolean; unknown?: boolean; lastMessage?: string };
}

/** MachineService.Memory → meminfo, in kB like /proc/meminfo. */
export interface TalosMemory {
  memtotal: Uint64;
  memavailable: Uint64;
  memfree?: Uint64;
}

/** MachineService.LoadAvg. */
export interface TalosLoadAvg {
  load1: number;
  load5: number;
  load15: number;
}

/** CPUStat: cumulative seconds since boot, as in /proc/stat. */
export interface TalosCpuStat {
  user: number;
  nice?: number;
  system: number;
  idle: number;
  iowait?: number;
  irq?: number;
  softIrq?: number;
  steal?: number;
}

/** MachineService.SystemStat; `cpu` has one entry per logical CPU. */
export interface TalosSystemStat {
  cpuTotal: TalosCpuStat;
  cpu?: TalosCpuStat[];
}

/** DiskStat; sectors are 512 bytes. */
export interface TalosDiskStat {
  name: string;
  readSectors: Uint64;
  writeSectors: Uint64;
  ioTimeMs?: Uint64;
}

/** MachineService.DiskStats. */
export interface TalosDiskStats {
  total?: TalosDiskStat;
  devices?: TalosDiskStat[];
}

/** MachineService.Mounts → stats[]; sizes in bytes. */
export interface TalosMount {
  filesystem: string;
  size: Uint64;
  available: Uint64;
  mountedOn: string;
}

/** MachineService.EtcdMemberList → members[]. */
export interface EtcdMember {
  id: Uint64;
  hostname: string;
  isLearner?: boolean;
}

/** MachineService.EtcdStatus → memberStatus. */
export interface EtcdMemberStatus {
  memberId: Uint64;
  dbSize?: Uint64;
  leader?: Uint64;
  errors?: string[];
  isLearner?: boolean;
}

export interface TalosEtcd {
  members: EtcdMember[];
  status?: EtcdMemberStatus;
}

/** Everything read from one machine's Talos API in a pass. Optional parts were not read or failed alone. */
export interface TalosReport {
  version: TalosVersion;
  services: TalosService[];
  memory?: TalosMemory;
  loadavg?: TalosLoadAvg;
  systemStat?: TalosSystemStat;
  diskStats?: TalosDiskStats;
  mounts?: TalosMount[];
  /** Control planes only. */
  etcd?: TalosEtcd | Failed;
}

export type MachineRole = 'controlplane' | 'worker';

export interface MachineInput {
  id: string;
  /** Hostname, which is also the machine's Kubernetes node name. */
  name: string;
  role: MachineRole;
  /** The whole Talos side failed (unreachable, deadline, refused): `{ error }`. */
  talos: TalosReport | Failed;
  /** systemStat.cpuTotal from the previous pass, so CPU utilisation can be derived. */
  previousCpu?: TalosCpuStat;
}

export interface ClusterInput {
  machines: MachineInput[];
  kube: KubeSnapshot | Failed;
  /** Versions the cluster is configured for; a mismatch is reported. */
  expected?: { talosVersion?: string; kubernetesVersion?: string };
  /** The pass's clock, used for durations such as "NotReady for 5m". */
  now: Date | number;
}

export type HealthState = 'healthy' | 'degraded' | 'unreachable' | 'unknown';

/** One time-series point; the caller adds machine id and timestamp when storing. */
export interface Sample {
  metric: string;
  value: number;
}

export interface MachineAssessment {
  id: string;
  name: string;
  role: MachineRole;
  state: HealthState;
  reasons: string[];
  talosVersion: string | null;
  /** The kubelet's version as the node reports it. */
  kubernetesVersion: string | null;
  samples: Sample[];
}

export interface EtcdSummary {
  /** Control-plane machines, i.e. the members there should be. */
  expected: number;
  /** Voting members in the list the control planes report; null when no list could be read. */
  members: number | null;
  healthy: number;
  learners: number;
}

export interface ClusterAssessment {
  state: HealthState;
  reasons: string[];
  /** The API server's gitVersion, when reachable. */
  kubernetesVersion: string | null;
  talosVersions: string[];
  etcd: EtcdSummary | null;
  machines: MachineAssessment[];
}
