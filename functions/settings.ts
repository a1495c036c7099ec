// The host's settings as handlers and executors see them; only types, so any host can supply them.
import type { NodeNetworks } from '../lib/talos/node-networks.ts';

/** What handlers and executors need from the host; tests build their own. */
export interface Settings {
  dataDir: string;
  /** Admin token given by the environment (compared in constant time), if any. */
  adminToken?: string;
  collectCron: string;
  /** Nodes (and Kubernetes APIs) a collect pass reads at once. */
  collectConcurrency: number;
  /** Deadline of each Talos call and of each cluster's whole Kubernetes read, in ms. */
  collectDeadlineMs: number;
  /** How long raw health samples are kept before they are folded into hourly aggregates. */
  retentionRawS: number;
  /** State versions kept per cluster (REZUS_STATE_KEEP_VERSIONS); older ones are deleted. Default 100. */
  stateKeepVersions?: number;
  /** Poll interval for run event followers (SSE) in ms. */
  followPollMs: number;
  /** A quiet event stream sends a comment this often, so proxies keep it open. */
  keepAliveMs: number;
  /**
   * Database reads one event stream makes before it closes for the client to reconnect where it
   * left off (Last-Event-ID); absent: no limit. On Workers every read is a subrequest, and a
   * request may make only so many (50 on the free plan): past them the stream would break.
   */
  streamReads?: number;
  tofu: {
    /** REZUS_TOFU_BIN, else tofu, else terraform on pathEnv. */
    bin?: string;
    pathEnv: string;
    /** How tofu on this machine reaches the state backend: the runner's own listener. */
    selfUrl: string;
    /** After SIGINT, how long tofu gets to release its lock and write state before SIGKILL. */
    cancelGraceMs: number;
    /** tofu's -lock-timeout, e.g. `30s`. */
    lockTimeout?: string;
  };
  /** Overrides of the upgrade timeouts and poll intervals (defaults in runner/jobs/upgrade/timings.ts). */
  upgrade?: Partial<UpgradeTimings>;
  /**
   * Home Assistant add-on: requests from the Supervisor's ingress proxy carrying X-Ingress-Path
   * are the admin without a login. Off unless the runner is configured for the add-on.
   */
  trustIngress?: boolean;
  /** Talos push-config and bootstrap timings; absent fields take the defaults in runner/jobs/push-config/timings.ts. */
  pushConfig?: Partial<PushTimings>;
  /** Cron pattern of scheduled etcd snapshots (every bootstrapped cluster); absent: none scheduled. */
  etcdSnapshotCron?: string;
  /** etcd snapshots kept per cluster (default 7). */
  etcdSnapshotKeep?: number;
  /** Cron pattern of scheduled backups of the embedded database (REZUS_BACKUP_CRON); absent: none scheduled. */
  backupCron?: string;
  /** Backup files kept in <dataDir>/backups (REZUS_BACKUP_KEEP, default 7); older ones are deleted after each backup. */
  backupKeep?: number;
  /** STUN servers the mesh hub asks for its public address (REZUS_MESH_STUN_SERVERS); absent: STUN off. */
  meshStunServers?: { host: string; port: number }[];
  /** Cron pattern of the STUN check (default every minute). */
  meshStunCron?: string;
  /**
   * The only networks machine addresses and cluster endpoints may be in (REZUS_NODE_NETWORKS):
   * the API refuses an address outside them and the runner never dials one. Absent: any address.
   */
  nodeNetworks?: NodeNetworks;
}

export interface PushTimings {
  /** Deadline of each Talos API call. */
  callDeadlineMs: number;
  /** How long a pushed node may take to install, reboot and answer over mTLS. */
  readyTimeoutMs: number;
  /** Pause between readiness probes (and bootstrap retries). */
  pollMs: number;
}

/** How long each phase of a node's upgrade may take and how often it is polled. */
export interface UpgradeTimings {
  /** Deadline of each unary Talos call (Version, ServiceList, Reboot, …). */
  callDeadlineMs: number;
  /** Deadline of the image pull and install streams. */
  installDeadlineMs: number;
  /** From the upgrade call until the node answers again, rebooted, with the new version. */
  rebootTimeoutMs: number;
  /** From the node's return until it passes the health gate. */
  gateTimeoutMs: number;
  /** Pause between polls while waiting and gating. */
  pollMs: number;
  /** Time budget of one Kubernetes API read. */
  kubeDeadlineMs: number;
  /** Talos reads in flight at once when the whole cluster is checked. */
  readConcurrency: number;
  /** How long what a bootstrap-manifest sync changed may take to be ready (talosctl's reconcile timeout). */
  manifestWaitMs: number;
}

