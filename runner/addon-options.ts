import { Cron } from 'croner';
import { z } from 'zod';
import { parseMasterKey } from '../lib/crypto/master-key.ts';
import { parseDuration } from './config.ts';

/** What the add-on always runs with: state in the Supervisor's /data volume, served on the ingress port. */
export const ADDON_FIXED_ENV = Object.freeze({
  REZUS_DATA_DIR: '/data',
  REZUS_HOST: '0.0.0.0',
  REZUS_PORT: '8099',
  REZUS_TRUST_INGRESS: 'true',
});

// Home Assistant's log levels (bashio's set), folded onto the runner's four.
const LOG_LEVELS = { trace: 'debug', debug: 'debug', info: 'info', notice: 'info', warning: 'warn', error: 'error', fatal: 'error' } as const;

/** An option the user left blank arrives absent, as "" or as null; all three mean "not set". */
const blankToUndefined = (v: unknown) => (v === '' || v === null ? undefined : v);
const optionalText = <T extends z.ZodType>(schema: T) => z.preprocess(blankToUndefined, schema.optional());

const validCron = (pattern: string) => {
  try {
    new Cron(pattern, { paused: true }).stop();
    return true;
  } catch {
    return false;
  }
};
const validDuration = (v: string) => {
  try {
    return parseDuration(v) > 0;
  } catch {
    return false;
  }
};
const validMasterKey = (v: string) => {
  try {
    parseMasterKey(v);
    return true;
  } catch {
    return false;
  }
};

const int = (min: number, max: number, dflt: number) => z.number().int().min(min).max(max).default(dflt);

/** Mirrors `schema` in addon/config.yaml; the Supervisor checks types, this checks meaning. */
export const addonOptionsSchema = z.object({
  log_level: z.enum(Object.keys(LOG_LEVELS) as [keyof typeof LOG_LEVELS]).default('info'),
  collect_cron: z.string().trim().default('* * * * *').refine(validCron, 'must be a cron pattern like "* * * * *" (optional seconds field)'),
  retention_raw: z.string().trim().default('24h').refine(validDuration, 'must be a duration like 90m, 24h or 7d'),
  worker_concurrency: int(1, 64, 4),
  collect_concurrency: int(1, 1024, 64),
  // The add-on's `timeout` (config.yaml) is 60 s: the runner must be done well before SIGKILL.
  shutdown_grace_s: int(0, 50, 20),
  admin_token: optionalText(z.string().min(32, 'must be at least 32 characters')),
  master_key: optionalText(z.string().refine(validMasterKey, 'must be 32 bytes, as 64 hex characters or base64')),
  database_url: optionalText(z.string().regex(/^(libsql|https):\/\/[^\s]+$/, 'must be a libsql:// or https:// URL')),
  database_auth_token: optionalText(z.string()),
  // Checked in full (CIDR networks) by the runner's REZUS_NODE_NETWORKS.
  node_networks: optionalText(z.string().regex(/^[0-9A-Fa-f:./,\s]+$/, 'must be networks in CIDR form, e.g. 192.168.1.0/24,2001:db8::/48')),
  // Checked in full (two host:port entries) by the runner's REZUS_MESH_STUN_SERVERS.
  mesh_stun_servers: optionalText(z.string().regex(/^[^\s,]+:\d{1,5},[^\s,]+:\d{1,5}$/, 'must be two STUN servers, host:port,host:port')),
  backup_cron: optionalText(z.string().trim().refine(validCron, 'must be a cron pattern like "0 4 * * *" (optional seconds field)')),
  backup_keep: z.preprocess(blankToUndefined, z.number().int().min(1).max(1000).optional()),
});

export type AddonOptions = z.output<typeof addonOptionsSchema>;

export class AddonOptionsError extends Error {
  override name = 'AddonOptionsError';
}

/** Turns /data/options.json into the runner's environment; every value is checked, the first problem named. */
export function addonOptionsToEnv(options: unknown): Record<string, string> {
  const res = addonOptionsSchema.safeParse(options ?? {});
  if (!res.success) {
    const issue = res.error.issues[0]!;
    const where = issue.path.length ? issue.path.join('.') : 'options';
    // Never echo the value: it may be a token or key.
    throw new AddonOptionsError(`add-on option ${where}: ${issue.message}`);
  }
  const o = res.data;
  if (o.database_auth_token && !o.database_url) throw new AddonOptionsError('add-on option database_auth_token: needs database_url');
  const env: Record<string, string> = {
    ...ADDON_FIXED_ENV,
    REZUS_LOG_LEVEL: LOG_LEVELS[o.log_level],
    REZUS_COLLECT_CRON: o.collect_cron,
    REZUS_RETENTION_RAW: o.retention_raw,
    REZUS_WORKER_CONCURRENCY: String(o.worker_concurrency),
    REZUS_COLLECT_CONCURRENCY: String(o.collect_concurrency),
    REZUS_SHUTDOWN_GRACE_S: String(o.shutdown_grace_s),
  };
  if (o.admin_token) env.REZUS_ADMIN_TOKEN = o.admin_token;
  if (o.master_key) env.REZUS_MASTER_KEY = o.master_key;
  if (o.database_url) env.REZUS_DB_URL = o.database_url;
  if (o.database_auth_token) env.REZUS_DB_AUTH_TOKEN = o.database_auth_token;
  if (o.mesh_stun_servers) env.REZUS_MESH_STUN_SERVERS = o.mesh_stun_servers;
  if (o.node_networks) env.REZUS_NODE_NETWORKS = o.node_networks;
  if (o.backup_cron) env.REZUS_BACKUP_CRON = o.backup_cron;
  if (o.backup_keep !== undefined) env.REZUS_BACKUP_KEEP = String(o.backup_keep);
  return env;
}
