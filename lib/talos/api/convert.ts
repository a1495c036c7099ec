import type {
  ApplyMode, CpuStat, DiskStat, EtcdMember, EtcdMemberAlarm, EtcdMemberStatus, MemInfo, ServiceInfo, SystemStatResult, VersionResult,
} from './types.ts';
import { MEMINFO_FIELDS } from './types.ts';

/** Raw proto-loader objects: snake_case keys, 64-bit integers as decimal strings, enums as names. */
export type Raw = Record<string, unknown>;

const MODE_TO_PROTO: Record<ApplyMode, string> = {
  auto: 'AUTO',
  reboot: 'REBOOT',
  'no-reboot': 'NO_REBOOT',
  staged: 'STAGED',
  try: 'TRY',
};

export function applyModeToProto(mode: ApplyMode): string {
  const m = MODE_TO_PROTO[mode];
  if (!m) throw new TypeError(`unknown apply mode ${JSON.stringify(mode)}`);
  return m;
}

export function applyModeFromProto(value: unknown): ApplyMode {
  const found = (Object.keys(MODE_TO_PROTO) as ApplyMode[]).find((k) => MODE_TO_PROTO[k] === value);
  return found ?? 'reboot';
}

export function obj(v: unknown): Raw | null {
  return v !== null && typeof v === 'object' ? (v as Raw) : null;
}

export function str(v: unknown): string {
  return typeof v === 'string' ? v : v === undefined || v === null ? '' : String(v);
}

/** Counters (kB, sectors, ms) stay far below 2^53, so a number is exact enough. */
export function num(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && v !== '') return Number(v);
  return 0;
}

export function bool(v: unknown): boolean {
  return v === true;
}

export function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.map(str) : [];
}

export function list(v: unknown): Raw[] {
  return Array.isArray(v) ? v.map((x) => obj(x) ?? {}) : [];
}

export function timestamp(v: unknown): Date | null {
  const t = obj(v);
  if (!t) return null;
  const ms = num(t['seconds']) * 1000 + Math.floor(num(t['nanos']) / 1e6);
  return ms === 0 ? null : new Date(ms);
}

export function toVersion(m: Raw): VersionResult {
  const v = obj(m['version']) ?? {};
  const p = obj(m['platform']);
  const f = obj(m['features']);
  return {
    tag: str(v['tag']),
    sha: str(v['sha']),
    built: str(v['built']),
    goVersion: str(v['go_version']),
    os: str(v['os']),
    arch: str(v['arch']),
    platform: p ? { name: str(p['name']), mode: str(p['mode']) } : null,
    features: f ? { rbac: bool(f['rbac']) } : null,
  };
}

export function toServices(m: Raw): ServiceInfo[] {
  return list(m['services']).map((s) => {
    const h = obj(s['health']);
    return {
      id: str(s['id']),
      state: str(s['state']),
      health: h
        ? { unknown: bool(h['unknown']), healthy: bool(h['healthy']), lastMessage: str(h['last_message']), lastChange: timestamp(h['last_change']) }
        : null,
      events: list(obj(s['events'])?.['events']).map((e) => ({ msg: str(e['msg']), state: str(e['state']), ts: timestamp(e['ts']) })),
    };
  });
}

export function toMemInfo(m: Raw): MemInfo {
  const raw = obj(m['meminfo']) ?? {};
  const out = {} as MemInfo;
  for (const k of MEMINFO_FIELDS) out[k] = num(raw[k]);
  return out;
}

function toCpuStat(c: Raw): CpuStat {
  return {
    user: num(c['user']),
    nice: num(c['nice']),
    system: num(c['system']),
    idle: num(c['idle']),
    iowait: num(c['iowait']),
    irq: num(c['irq']),
    softIrq: num(c['soft_irq']),
    steal: num(c['steal']),
    guest: num(c['guest']),
    guestNice: num(c['guest_nice']),
  };
}

export function toSystemStat(m: Raw): SystemStatResult {
  const total = obj(m['cpu_total']);
  return {
    bootTime: num(m['boot_time']),
    cpuTotal: total ? toCpuStat(total) : null,
    cpu: list(m['cpu']).map(toCpuStat),
    irqTotal: num(m['irq_total']),
    contextSwitches: num(m['context_switches']),
    processCreated: num(m['process_created']),
    processRunning: num(m['process_running']),
    processBlocked: num(m['process_blocked']),
    softIrqTotal: num(m['soft_irq_total']),
  };
}

function toDiskStat(d: Raw): DiskStat {
  return {
    name: str(d['name']),
    readCompleted: num(d['read_completed']),
    readMerged: num(d['read_merged']),
    readSectors: num(d['read_sectors']),
    readTimeMs: num(d['read_time_ms']),
    writeCompleted: num(d['write_completed']),
    writeMerged: num(d['write_merged']),
    writeSectors: num(d['write_sectors']),
    writeTimeMs: num(d['write_time_ms']),
    ioInProgress: num(d['io_in_progress']),
    ioTimeMs: num(d['io_time_ms']),
    ioTimeWeightedMs: num(d['io_time_weighted_ms']),
    discardCompleted: num(d['discard_completed']),
    discardMerged: num(d['discard_merged']),
    discardSectors: num(d['discard_sectors']),
    discardTimeMs: num(d['discard_time_ms']),
  };
}

export function toDiskStats(m: Raw): { total: DiskStat | null; devices: DiskStat[] } {
  const total = obj(m['total']);
  return { total: total ? toDiskStat(total) : null, devices: list(m['devices']).map(toDiskStat) };
}

export function toEtcdMembers(m: Raw): EtcdMember[] {
  return list(m['members']).map((e) => ({
    id: str(e['id']),
    hostname: str(e['hostname']),
    peerUrls: strings(e['peer_urls']),
    clientUrls: strings(e['client_urls']),
    isLearner: bool(e['is_learner']),
  }));
}

export function toEtcdStatus(m: Raw): EtcdMemberStatus {
  const s = obj(m['member_status']) ?? {};
  return {
    memberId: str(s['member_id']),
    leader: str(s['leader']),
    protocolVersion: str(s['protocol_version']),
    storageVersion: str(s['storage_version']),
    dbSize: num(s['db_size']),
    dbSizeInUse: num(s['db_size_in_use']),
    raftIndex: str(s['raft_index']),
    raftTerm: str(s['raft_term']),
    raftAppliedIndex: str(s['raft_applied_index']),
    errors: strings(s['errors']),
    isLearner: bool(s['is_learner']),
  };
}

const ALARMS: ReadonlySet<string> = new Set(['NONE', 'NOSPACE', 'CORRUPT']);

export function toEtcdAlarms(m: Raw): EtcdMemberAlarm[] {
  return list(m['member_alarms']).map((a) => {
    const alarm = str(a['alarm']);
    return { memberId: str(a['member_id']), alarm: (ALARMS.has(alarm) ? alarm : 'NONE') as EtcdMemberAlarm['alarm'] };
  });
}
