import { resolve } from 'node:path';
import { z } from 'zod';
import type { LogLevel } from '../lib/log.ts';
import { parseStunServers, type StunServer } from '../lib/mesh/stun.ts';

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
}

const DURATION = /^(\d+)(s|m|h|d)$/;
export function parseDuration(v: string): number {
  const m = DURATION.exec(v.trim());
  if (!m) throw new Error(`not a duration: "${v}" (use e.g. 90s, 30m, 24h, 7d)`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 's' | 'm' | 'h' | 'd'];
}

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const optional = z
  .string()
  .optional()
  .transform((v) => (v === '' ? undefined : v));

const bool = z
  .enum(['true', 'false', '1', '0', ''])
  .default('false')
  .transform((v) => v === 'true' || v === '1');

const envSchema = z.object({
  REZUS_DATA_DIR: z.string().default('./data'),
  REZUS_DB_URL: optional,
  REZUS_DB_AUTH_TOKEN: optional,
  REZUS_HOST: z.string().default('0.0.0.0'),
  REZUS_PORT: int(0, 65535).default(8080),
  REZUS_ADMIN_TOKEN: optional.refine((v) => v === undefined || v.length >= 32, 'must be at least 32 characters'),
  REZUS_MASTER_KEY: optional,
  REZUS_EDGE_KEY: optional,
  REZUS_COLLECT_CRON: z.string().default('* * * * *'),
  REZUS_ETCD_SNAPSHOT_CRON: z.string().default('17 3 * * *'),
  REZUS_ETCD_SNAPSHOT_KEEP: int(1, 1000).default(7),
  REZUS_SHUTDOWN_GRACE_S: int(0, 3600).default(30),
  REZUS_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  REZUS_LEASE_S: int(2, 3600).default(30),
  REZUS_WORKER_CONCURRENCY: int(1, 64).default(4),
  REZUS_TOFU_BIN: optional,
  REZUS_RETENTION_RAW: z.string().default('24h'),
  REZUS_COLLECT_CONCURRENCY: int(1, 1024).default(64),
  REZUS_TRUST_INGRESS: bool,
  REZUS_COLLECT_DEADLINE: z.string().default('2s'),
  REZUS_STATE_KEEP_VERSIONS: int(1, 100_000).default(100),
  REZUS_MESH_STUN_SERVERS: z
    .string()
    .default('')
    .transform((v, ctx) => {
      try {
        const servers = parseStunServers(v);
        // One server tells the address; a second, from the same socket, tells whether the NAT is symmetric.
        if (servers.length === 1) ctx.addIssue({ code: 'custom', message: 'give two STUN servers (host:port,host:port) or none' });
        return servers;
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    }),
  REZUS_MESH_STUN_CRON: z.string().default('* * * * *'),
});

/** The runner's whole configuration comes from the environment; everything has a default. */
export function loadConfig(env: Record<string, string | undefined>): RunnerConfig {
  const res = envSchema.safeParse(env);
  if (!res.success) {
    const issue = res.error.issues[0]!;
    throw new Error(`configuration: ${issue.path.join('.')}: ${issue.message}`);
  }
  const e = res.data;
  const dataDir = resolve(e.REZUS_DATA_DIR);
  return {
    dataDir,
    dbUrl: e.REZUS_DB_URL ?? `file:${resolve(dataDir, 'rezus.db')}`,
    dbAuthToken: e.REZUS_DB_AUTH_TOKEN,
    host: e.REZUS_HOST,
    port: e.REZUS_PORT,
    adminToken: e.REZUS_ADMIN_TOKEN,
    masterKey: e.REZUS_MASTER_KEY,
    edgeKey: e.REZUS_EDGE_KEY,
    collectCron: e.REZUS_COLLECT_CRON,
    etcdSnapshotCron: e.REZUS_ETCD_SNAPSHOT_CRON,
    etcdSnapshotKeep: e.REZUS_ETCD_SNAPSHOT_KEEP,
    shutdownGraceS: e.REZUS_SHUTDOWN_GRACE_S,
    logLevel: e.REZUS_LOG_LEVEL,
    leaseMs: e.REZUS_LEASE_S * 1000,
    workerConcurrency: e.REZUS_WORKER_CONCURRENCY,
    tofuBin: e.REZUS_TOFU_BIN,
    retentionRawS: parseDuration(e.REZUS_RETENTION_RAW),
    collectConcurrency: e.REZUS_COLLECT_CONCURRENCY,
    trustIngress: e.REZUS_TRUST_INGRESS,
    collectDeadlineMs: parseDuration(e.REZUS_COLLECT_DEADLINE) * 1000,
    stateKeepVersions: e.REZUS_STATE_KEEP_VERSIONS,
    meshStunServers: e.REZUS_MESH_STUN_SERVERS,
    meshStunCron: e.REZUS_MESH_STUN_CRON,
  };
}
