/** Plain results returned by the Talos API client (camelCase, unwrapped from `messages[0]`). */

export interface CallOptions {
  /** Per-call deadline; defaults to 10 s for unary calls and resource lists, 15 min for streams. */
  deadlineMs?: number;
  signal?: AbortSignal;
}

export type ApplyMode = 'auto' | 'reboot' | 'no-reboot' | 'staged' | 'try';

export interface ApplyConfigurationInput {
  data: Uint8Array;
  mode: ApplyMode;
  dryRun?: boolean;
  /** TRY mode only: how long until the node rolls back (upstream default 1 min). */
  tryModeTimeoutMs?: number;
}

export interface ApplyConfigurationResult {
  /** The mode the node actually chose (AUTO resolves to no-reboot or reboot). */
  mode: ApplyMode;
  modeDetails: string;
  warnings: string[];
}

export interface VersionResult {
  tag: string;
  sha: string;
  built: string;
  goVersion: string;
  os: string;
  arch: string;
  platform: { name: string; mode: string } | null;
  features: { rbac: boolean } | null;
}

export interface ServiceHealth {
  unknown: boolean;
  healthy: boolean;
  lastMessage: string;
  lastChange: Date | null;
}

export interface ServiceEvent {
  msg: string;
  state: string;
  ts: Date | null;
}

export interface ServiceInfo {
  id: string;
  state: string;
  health: ServiceHealth | null;
  events: ServiceEvent[];
}

export const MEMINFO_FIELDS = [
  'memtotal', 'memfree', 'memavailable', 'buffers', 'cached', 'swapcached', 'active', 'inactive',
  'activeanon', 'inactiveanon', 'activefile', 'inactivefile', 'unevictable', 'mlocked', 'swaptotal',
  'swapfree', 'dirty', 'writeback', 'anonpages', 'mapped', 'shmem', 'slab', 'sreclaimable', 'sunreclaim',
  'kernelstack', 'pagetables', 'nfsunstable', 'bounce', 'writebacktmp', 'commitlimit', 'committedas',
  'vmalloctotal', 'vmallocused', 'vmallocchunk', 'hardwarecorrupted', 'anonhugepages', 'shmemhugepages',
  'shmempmdmapped', 'cmatotal', 'cmafree', 'hugepagestotal', 'hugepagesfree', 'hugepagesrsvd',
  'hugepagessurp', 'hugepagesize', 'directmap4k', 'directmap2m', 'directmap1g',
] as const;

/** /proc/meminfo values in kB, keyed like upstream's MemInfo fields. */
export type MemInfo = Record<(typeof MEMINFO_FIELDS)[number], number>;

export interface LoadAvgResult {
  load1: number;
  load5: number;
  load15: number;
}

/** Cumulative seconds per state, as in /proc/stat. */
export interface CpuStat {
  user: number;
  nice: number;
  system: number;
  idle: number;
  iowait: number;
  irq: number;
  softIrq: number;
  steal: number;
  guest: number;
  guestNice: number;
}

export interface SystemStatResult {
  /** Unix seconds. */
  bootTime: number;
  cpuTotal: CpuStat | null;
  cpu: CpuStat[];
  irqTotal: number;
  contextSwitches: number;
  processCreated: number;
  processRunning: number;
  processBlocked: number;
  softIrqTotal: number;
}

export interface DiskStat {
  name: string;
  readCompleted: number;
  readMerged: number;
  readSectors: number;
  readTimeMs: number;
  writeCompleted: number;
  writeMerged: number;
  writeSectors: number;
  writeTimeMs: number;
  ioInProgress: number;
  ioTimeMs: number;
  ioTimeWeightedMs: number;
  discardCompleted: number;
  discardMerged: number;
  discardSectors: number;
  discardTimeMs: number;
}

export interface DiskStatsResult {
  total: DiskStat | null;
  devices: DiskStat[];
}

export interface EtcdMember {
  /** uint64 member id as a decimal string (a JS number would round it). */
  id: string;
  hostname: string;
  peerUrls: string[];
  clientUrls: string[];
  isLearner: boolean;
}

export interface EtcdMemberStatus {
  memberId: string;
  leader: string;
  protocolVersion: string;
  storageVersion: string;
  dbSize: number;
  dbSizeInUse: number;
  raftIndex: string;
  raftTerm: string;
  raftAppliedIndex: string;
  errors: string[];
  isLearner: boolean;
}

/** One raised etcd alarm: NOSPACE (the database reached its quota: writes refused) or CORRUPT. */
export interface EtcdMemberAlarm {
  memberId: string;
  alarm: 'NOSPACE' | 'CORRUPT' | 'NONE';
}

export interface LegacyUpgradeInput {
  image: string;
  preserve?: boolean;
  stage?: boolean;
  force?: boolean;
}

export interface LegacyUpgradeResult {
  ack: string;
  actorId: string;
}

export interface ImagePullProgress {
  layerId: string;
  status: string;
  offset: number;
  total: number;
}

export interface LifecycleUpgradeInput {
  /** Installer image, already pulled into the system containerd namespace (see imagePull). */
  image: string;
}

export interface LifecycleUpgradeResult {
  exitCode: number;
  messages: string[];
}

/** One mounted filesystem (MachineService/Mounts); sizes in bytes. */
export interface MountStat {
  filesystem: string;
  size: number;
  available: number;
  mountedOn: string;
}

/**
 * One COSI resource as the node's `cosi.resource.State` returns it (`talosctl get`). The spec is
 * kept as the YAML the node rendered: each type's protobuf spec has its own schema, the YAML is
 * what talosctl prints and what Talos's marshalling defines.
 */
export interface CosiResource {
  id: string;
  namespace: string;
  type: string;
  /** Moves with every change of the resource; a string, as COSI sends it. */
  version: string;
  /** `running`, or `tearingDown` while the resource is being destroyed. */
  phase: string;
  /** The controller that writes the resource (e.g. `k8s.ManifestController`); empty for user resources. */
  owner: string;
  labels: Record<string, string>;
  yamlSpec: string;
}
