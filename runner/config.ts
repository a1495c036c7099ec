import { resolve } from 'node:path';
import type { LogLevel } from '../lib/log.ts';
import { parseStunServers, type StunServer } from '../lib/mesh/stun.ts';
import { parseNodeNetworks, type NodeNetworks } from '../lib/talos/node-networks.ts';

export interface RunnerConfig {
  dataDir: string;
  dbUrl: string;
  dbAuthToken?: string;
  host: string;
  port: number;
  adminToken?: string;
  masterKey?: string;
  /** Shared with a Worker (wrangler secret REZUS_EDGE_KEY): seals webhook secrets only. */
  edgeKey?: string;
  collectCron: string;
  /** Cron pattern of scheduled etcd snapshots; empty: none. */
  etcdSnapshotCron: string;
  etcdSnapshotKeep: number;
  /** Cron pattern of scheduled backups; empty: none. */
  backupCron: string;
  backupKeep: number;
  shutdownGraceS: number;
  logLevel: LogLevel;
  leaseMs: number;
  workerConcurrency: number;
  tofuBin?: string;
  retentionRawS: number;
  collectConcurrency: number;
  trustIngress: boolean;
  collectDeadlineMs: number;
  stateKeepVersions: number;
  /** STUN servers of the mesh hub's public-address check; empty: off. */
  meshStunServers: StunServer[];
  meshStunCron: string;
  /** Where machines and cluster endpoints may be; absent: anywhere. */
  nodeNetworks?: NodeNetworks;
}

const DURATION = /^(\d+)(s|m|h|d)$/;
export function parseDuration(v: string): number {
  const m = DURATION.exec(v.trim());
  if (!m) throw new Error(`not a duration: "${v}" (use e.g. 90s, 30m, 24h, 7d)`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 's' | 'm' | 'h' | 'd'];
}

// Read by hand, not with a zod schema: the runner parses this first thing at every start, and zod
// (its biggest library) is then needed by nothing else until a request or a job validates input.

/** A bad variable, named in the message (`configuration: NAME: why`); secrets' values are never quoted. */
class ConfigError extends Error {
  constructor(variable: string, why: string, options?: ErrorOptions) {
    super(`configuration: ${variable}: ${why}`, options);
  }
}

type Env = Record<string, string | undefined>;

/** A value given, or undefined for an unset or empty variable. */
function given(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

function str(env: Env, name: string, fallback: string): string {
  return env[name] ?? fallback;
}

function int(env: Env, name: string, min: number, max: number, fallback: number): number {
  const v = given(env, name);
  if (v === undefined) return fallback;
  const n = /^\s*\d+\s*$/.test(v) ? Number(v) : NaN;
  if (!(n >= min && n <= max)) throw new ConfigError(name, `must be a whole number from ${min} to ${max}, got ${JSON.stringify(v)}`);
  return n;
}

function bool(env: Env, name: string): boolean {
  const v = env[name] ?? '';
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0' || v === '') return false;
  throw new ConfigError(name, `must be true, false, 1 or 0, got ${JSON.stringify(v)}`);
}

function oneOf<const T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const v = env[name];
  if (v === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(v)) throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`);
  return v as T;
}

function durationS(env: Env, name: string, fallback: string): number {
  try {
    return parseDuration(str(env, name, fallback));
  } catch (err) {
    throw new ConfigError(name, (err as Error).message, { cause: err });
  }
}

function adminToken(env: Env): string | undefined {
  const v = given(env, 'REZUS_ADMIN_TOKEN');
  // The token itself is never part of the message.
  if (v !== undefined && v.length < 32) throw new ConfigError('REZUS_ADMIN_TOKEN', 'must be at least 32 characters');
  return v;
}

function stunServers(env: Env): StunServer[] {
  let servers: StunServer[];
  try {
    servers = parseStunServers(str(env, 'REZUS_MESH_STUN_SERVERS', ''));
  } catch (err) {
    throw new ConfigError('REZUS_MESH_STUN_SERVERS', (err as Error).message, { cause: err });
  }
  // One server tells the address; a second, from the same socket, tells whether the NAT is symmetric.
  if (servers.length === 1) throw new ConfigError('REZUS_MESH_STUN_SERVERS', 'give two STUN servers (host:port,host:port) or none');
  return servers;
}

function nodeNetworks(env: Env): NodeNetworks | undefined {
  try {
    return parseNodeNetworks(str(env, 'REZUS_NODE_NETWORKS', ''));
  } catch (err) {
    throw new ConfigError('REZUS_NODE_NETWORKS', (err as Error).message, { cause: err });
  }
}

/** The runner's whole configuration comes from the environment; everything has a default. */
export function loadConfig(env: Env): RunnerConfig {
  const dataDir = resolve(str(env, 'REZUS_DATA_DIR', './data'));
  return {
    dataDir,
    dbUrl: given(env, 'REZUS_DB_URL') ?? `file:${resolve(dataDir, 'rezus.db')}`,
    dbAuthToken: given(env, 'REZUS_DB_AUTH_TOKEN'),
    host: str(env, 'REZUS_HOST', '0.0.0.0'),
    port: int(env, 'REZUS_PORT', 0, 65535, 8080),
    adminToken: adminToken(env),
    masterKey: given(env, 'REZUS_MASTER_KEY'),
    edgeKey: given(env, 'REZUS_EDGE_KEY'),
    collectCron: str(env, 'REZUS_COLLECT_CRON', '* * * * *'),
    etcdSnapshotCron: str(env, 'REZUS_ETCD_SNAPSHOT_CRON', '17 3 * * *'),
    etcdSnapshotKeep: int(env, 'REZUS_ETCD_SNAPSHOT_KEEP', 1, 1000, 7),
    // Off unless asked for: each backup is the whole database (every etcd snapshot included), on
    // the disk the add-on shares with Home Assistant, whose own backups already copy /data.
    backupCron: str(env, 'REZUS_BACKUP_CRON', ''),
    backupKeep: int(env, 'REZUS_BACKUP_KEEP', 1, 1000, 7),
    shutdownGraceS: int(env, 'REZUS_SHUTDOWN_GRACE_S', 0, 3600, 30),
    logLevel: oneOf(env, 'REZUS_LOG_LEVEL', ['debug', 'info', 'warn', 'error'], 'info'),
    leaseMs: int(env, 'REZUS_LEASE_S', 2, 3600, 30) * 1000,
    workerConcurrency: int(env, 'REZUS_WORKER_CONCURRENCY', 1, 64, 4),
    tofuBin: given(env, 'REZUS_TOFU_BIN'),
    retentionRawS: durationS(env, 'REZUS_RETENTION_RAW', '24h'),
    collectConcurrency: int(env, 'REZUS_COLLECT_CONCURRENCY', 1, 1024, 64),
    trustIngress: bool(env, 'REZUS_TRUST_INGRESS'),
    collectDeadlineMs: durationS(env, 'REZUS_COLLECT_DEADLINE', '2s') * 1000,
    stateKeepVersions: int(env, 'REZUS_STATE_KEEP_VERSIONS', 1, 100_000, 100),
    meshStunServers: stunServers(env),
    meshStunCron: str(env, 'REZUS_MESH_STUN_CRON', '* * * * *'),
    nodeNetworks: nodeNetworks(env),
  };
}
