/**
 * A simulated Talos node: a real grpc-js server speaking the Talos API over TLS on loopback.
 *
 * The sim owns its TCP listener and TLS termination (so it can blackhole, refuse, drop
 * connections and reject bad client certificates during the handshake like apid) and hands
 * each accepted TLS socket to grpc-js through a connection injector.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createWriteStream, closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { stringify as stringifyYaml } from 'yaml';
import { loadTalosServices } from '../../../lib/talos/api/proto-loader.ts';
import { talosInstallProblem } from '../../../lib/talos/talos-compat.ts';
import { ApidIdentity, sharedMaintenanceCert, uniqueMaintenanceCert, type MaintenanceCert } from './sim-certs.ts';
import { parseSimConfig, SimConfigError, type SimMachineConfig } from './sim-config.ts';
import { cosiReadRefusal, toProtoResource } from './cosi.ts';
import { SimManifestStore, type SimCosiResource } from './manifests.ts';

export type SimPhase = 'maintenance' | 'configured' | 'down' | 'stopped';

export interface SimEtcdMember {
  id: string;
  hostname: string;
  peerUrls?: string[];
  clientUrls?: string[];
  isLearner?: boolean;
}

export interface SimServiceState {
  state: string;
  healthy: boolean;
  unknown?: boolean;
  lastMessage?: string;
}

export interface SimNodeOptions {
  /** Address to listen on: loopback, or an address inside a test network namespace (mesh tests). */
  host?: string;
  /** Port to listen on (default: any free one); mesh tests use Talos's 50000 on an overlay-like address. */
  port?: number;
  /** Talos version tag reported by Version; below v1.13 the LifecycleService/ImageService are unknown. */
  version?: string;
  /** How long the node is unreachable while it reboots (after apply, upgrade or Reboot); at least ~120 ms. */
  rebootMs?: number;
  /**
   * How long a configured node keeps answering after it decided to reboot, as Talos does while
   * its reboot sequence stops the kubelet and the pods (default: 10 ms, long enough for the reply).
   */
  shutdownMs?: number;
  /** Start already configured with this machine config instead of in maintenance mode. */
  initialConfig?: string | Uint8Array;
  /** A worker config carries no OS CA key; this stands in for trustd on a control plane. */
  workerIssuer?: { certPem: string; keyPem: string };
  etcdMembers?: SimEtcdMember[];
  /** Mint a maintenance certificate for this node instead of sharing the per-process one. */
  uniqueMaintenanceCert?: boolean;
}

export interface ReceivedConfig {
  data: Buffer;
  mode: string;
  dryRun: boolean;
  tryModeTimeoutMs: number | undefined;
  phase: SimPhase;
}

export interface SimCall {
  method: string;
  phase: SimPhase;
  roles: string[];
}

type Raw = Record<string, unknown>;
type Role = 'reader' | 'operator' | 'admin';
type SurfaceCall = grpc.ServerUnaryCall<Raw, Raw> | grpc.ServerWritableStream<Raw, Raw>;

class SimRpcError extends Error {
  constructor(readonly code: grpc.status, message: string) {
    super(message);
  }
}

const OID_CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const COSI_LIST = 'cosi.resource.State/List';
const MACHINE_CONFIG_TYPE = 'MachineConfigs.config.talos.dev';
/** How long in-flight calls may finish when the node goes down for a reboot. */
const DRAIN_GRACE_MS = 100;
const ROLE_RANK: Record<Role, number> = { reader: 1, operator: 2, admin: 3 };
const ROLE_OF_CERT: Record<string, Role> = { 'os:admin': 'admin', 'os:operator': 'operator', 'os:reader': 'reader' };

/** Minimum role per RPC (upstream machined `rules`; unlisted methods need admin). */
const METHOD_ROLE: Record<string, Role> = {
  ApplyConfiguration: 'admin',
  Bootstrap: 'admin',
  Upgrade: 'admin',
  Reboot: 'operator',
  Version: 'reader',
  Hostname: 'reader',
  ServiceList: 'reader',
  Memory: 'reader',
  LoadAvg: 'reader',
  SystemStat: 'reader',
  DiskStats: 'reader',
  EtcdMemberList: 'reader',
  EtcdStatus: 'reader',
  EtcdForfeitLeadership: 'admin',
  EtcdAlarmList: 'reader',
  EtcdAlarmDisarm: 'operator',
  EtcdDefragment: 'operator',
  EtcdSnapshot: 'operator',
  EtcdRecover: 'admin',
  Mounts: 'reader',
  'ImageService/Pull': 'admin',
  'LifecycleService/Upgrade': 'admin',
  // machined's rules: COSI reads are open to readers; which types a reader sees, the state's access policy decides.
  [COSI_LIST]: 'reader',
};

function parseVersion(tag: string): [number, number, number] {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(tag);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : [0, 0, 0];
}

function atLeast(tag: string, major: number, minor: number): boolean {
  const [a, b] = parseVersion(tag);
  return a > major || (a === major && b >= minor);
}

/** `ghcr.io/siderolabs/installer:v1.13.9` or `factory.talos.dev/...:v1.13.9@sha256:…` → `v1.13.9`. */
export function versionFromImage(image: string): string | undefined {
  const noDigest = image.split('@')[0] ?? '';
  const tag = noDigest.slice(noDigest.lastIndexOf('/') + 1).split(':')[1];
  return tag && /^v\d+\.\d+\.\d+/.test(tag) ? tag : undefined;
}

/** A line as Go's `log.Printf` writes it with the default flags: local date and time first. */
function goLogLine(text: string, at = new Date()): string {
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${at.getFullYear()}/${p(at.getMonth() + 1)}/${p(at.getDate())} ${p(at.getHours())}:${p(at.getMinutes())}:${p(at.getSeconds())} ${text}`;
}

/**
 * What the installer `image` prints when its pre-flight check (upstream UpgradeableFrom) refuses a
 * host on `hostVersion`, ending with its error; undefined when it would go on. The check prints
 * versions as semver does, without the `v`. An image whose tag names no version is let through:
 * the real installer knows its version, the sim cannot.
 */
function preflightRefusal(hostVersion: string, image: string): string[] | undefined {
  const target = versionFromImage(image);
  const problem = target ? talosInstallProblem(hostVersion, target) : undefined;
  if (!target || !problem) return undefined;
  const bare = (v: string): string => v.replace(/^v/, '');
  const why =
    problem.code === 'host_too_old'
      ? `host version ${bare(hostVersion)} is too old to upgrade to Talos ${bare(target)}`
      : `host version ${bare(hostVersion)} is too new to downgrade to Talos ${bare(target)}`;
  const error = `pre-flight checks failed: ${why}`;
  // cobra prints the error with its prefix, then the installer's main prints it once more and exits 1.
  return [goLogLine(`running Talos installer ${target}`), goLogLine('running pre-flight checks'), goLogLine(`host Talos version: ${hostVersion}`), `Error: ${error}`, error];
}

function randomName(): string {
  const s = randomBytes(3).toString('hex');
  return `talos-${s.slice(0, 3)}-${s.slice(3)}`;
}

function memberIdFor(seed: string): string {
  let h = 1469598103934665603n;
  for (const ch of Buffer.from(seed)) h = ((h ^ BigInt(ch)) * 1099511628211n) & 0xffffffffffffffffn;
  return h.toString();
}

function rolesOfSubject(o: string | string[] | undefined): string[] {
  return o === undefined ? [] : Array.isArray(o) ? o : [o];
}

/** The O= values of an X509Certificate subject (one attribute per line). */
function organizationsOf(subject: string): string[] {
  return subject
    .split('\n')
    .filter((l) => l.startsWith('O='))
    .map((l) => l.slice(2));
}

export class SimTalosNode {
  readonly host: string;
  port = 0;
  phase: SimPhase = 'maintenance';
  version: string;
  hostname: string;
  config: SimMachineConfig | undefined;
  stagedConfig: Buffer | undefined;
  bootstrapped = false;
  pendingVersion: string | undefined;
  readonly receivedConfigs: ReceivedConfig[] = [];
  readonly calls: SimCall[] = [];
  readonly bootstrapCalls: number[] = [];
  readonly upgrades: { api: 'legacy' | 'lifecycle'; image: string; stage: boolean }[] = [];
  readonly pulledImages: string[] = [];
  /** Images pulled into the CRI namespace (what Kubernetes pods run from). */
  readonly pulledCriImages: string[] = [];
  private readonly configListeners = new Set<(cfg: SimMachineConfig) => void>();
  readonly reboots: string[] = [];
  /** TLS handshakes completed (accepted) and rejected, for asserting what reached the node. */
  handshakes = { accepted: 0, rejected: 0 };
  maintenanceCert!: MaintenanceCert;

  private readonly opts: SimNodeOptions;
  private readonly rebootMs: number;
  private listener: net.Server | undefined;
  private tlsServer: tls.Server | undefined;
  private readonly apid = new ApidIdentity();
  private readonly sockets = new Set<net.Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly parked = new Set<() => void>();
  // Channelz keeps per-call statistics nobody reads here; off, the sim costs the bench less CPU.
  private readonly grpcServer = new grpc.Server({ 'grpc.enable_channelz': 0 });
  /**
   * The O= of each connection's client certificate, by the peer address grpc-js reports for its
   * calls: apid reads the roles off the verified certificate of the connection; converting that
   * certificate for every call cost the sim more than answering it.
   */
  private readonly peerRoles = new Map<string, string[]>();
  private readonly injector: ReturnType<grpc.Server['createConnectionInjector']>;
  private latencyMs = 0;
  private blackholed = false;
  private dropMidCall = false;
  private installFailure: string | undefined;
  private readonly nodeErrors = new Map<string, string>();
  private etcdMembers: SimEtcdMember[] | undefined;
  private etcdErrors: string[] = [];
  private readonly serviceOverrides = new Map<string, SimServiceState>();
  private readonly phaseWaiters = new Set<{ phase: SimPhase; resolve: () => void }>();
  /** Unix seconds of the last boot; moves forward on every reboot, as SystemStat's boot_time does. */
  bootTime = Math.floor(Date.now() / 1000) - 3600;
  /** Member id this node's etcd names as leader; the first member's when unset. */
  etcdLeader: string | undefined;
  /**
   * The etcd database EtcdSnapshot streams; its raft index moves with every write the test makes.
   * After a recovery it is the uploaded file's database part, read from disk when first asked for.
   */
  get etcdData(): Buffer {
    if (!Buffer.isBuffer(this.etcdDb)) this.etcdDb = readFileSync(this.etcdDb.path).subarray(0, this.etcdDb.bytes);
    return this.etcdDb;
  }
  set etcdData(data: Buffer) {
    this.etcdDb = data;
  }
  private etcdDb: Buffer | { path: string; bytes: number } = Buffer.from(`sim-etcd-db:${randomBytes(8).toString('hex')}:`.padEnd(4096, '.'));
  /**
   * What EtcdSnapshot sends wrong: the stream stops short, or one byte changes on the way, or
   * (`cut`) the stream fails with an error half-way through.
   */
  snapshotFault: 'truncated' | 'corrupt' | 'cut' | undefined;
  /** How many bytes each EtcdSnapshot message carries. */
  snapshotChunkBytes = 1024;
  etcdRaftIndex = 1024;
  /** The member's database file and the part of it in use; a defragmentation shrinks the first to the second. */
  etcdDbSize = 20_480_000;
  etcdDbSizeInUse = 10_240_000;
  /** Alarms raised in the cluster as this member reports them (etcd shares them across members). */
  etcdAlarms: Array<{ memberId: string; alarm: 'NOSPACE' | 'CORRUPT' }> = [];
  /** When each EtcdDefragment ran, and how long one takes. */
  readonly defragmentations: number[] = [];
  defragmentMs = 0;
  /**
   * The file EtcdRecover wrote the upload to, waiting for Bootstrap{recover_etcd}. On disk, as
   * upstream's (and so not in this process's memory: a test measures the runner's alone).
   */
  private recoverFile: string | undefined;
  private recoveredPath: string | undefined;
  private scratchDir: string | undefined;
  /** What a Bootstrap with recover_etcd restored from (read from disk). */
  get recoveredFrom(): Buffer | undefined {
    return this.recoveredPath ? readFileSync(this.recoveredPath) : undefined;
  }
  /** The bootstrap manifests, as COSI resources rendered from the running config. */
  readonly manifests = new SimManifestStore();
  /** The MachineConfig resource as last listed: COSI's version moves only when the config does. */
  private machineConfigResource: SimCosiResource | undefined;
  mounts: Array<{ filesystem: string; size: number; available: number; mountedOn: string }> = [
    { filesystem: '/dev/sda6', size: 100 * 2 ** 30, available: 60 * 2 ** 30, mountedOn: '/var' },
    { filesystem: 'overlay', size: 2 ** 30, available: 2 ** 29, mountedOn: '/' },
  ];

  constructor(opts: SimNodeOptions) {
    this.opts = opts;
    this.host = opts.host ?? '127.0.0.1';
    this.port = opts.port ?? 0;
    this.version = opts.version ?? 'v1.13.9';
    this.rebootMs = opts.rebootMs ?? 50;
    this.hostname = randomName();
    this.etcdMembers = opts.etcdMembers;
    const services = loadTalosServices();
    this.grpcServer.addService(services.machine, this.machineHandlers());
    this.grpcServer.addService(services.image, { Pull: this.serverStream('ImageService/Pull', (c) => this.imagePull(c)) });
    this.grpcServer.addService(services.lifecycle, { Upgrade: this.serverStream('LifecycleService/Upgrade', (c) => this.lifecycleUpgrade(c)) });
    this.grpcServer.addService(services.cosiState, {
      List: this.serverStream(COSI_LIST, (c) => this.cosiList(c)),
    });
    this.onConfig((cfg) => this.manifests.configChanged(cfg));
    this.injector = this.grpcServer.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  }

  /** `host:port` to dial, IPv6 bracketed. */
  get address(): string {
    return this.host.includes(':') ? `[${this.host}]:${this.port}` : `${this.host}:${this.port}`;
  }

  /** TCP connections open at the node now (a pooled client keeps one between passes). */
  get openConnections(): number {
    return this.sockets.size;
  }

  get maintenanceFingerprint(): string {
    return this.maintenanceCert.fingerprint;
  }

  async start(): Promise<void> {
    this.maintenanceCert = await (this.opts.uniqueMaintenanceCert ? uniqueMaintenanceCert() : sharedMaintenanceCert());
    if (this.opts.initialConfig !== undefined) {
      const data = Buffer.from(this.opts.initialConfig);
      const cfg = this.requireConfig(data);
      await this.enterConfigured(cfg, await this.configuredTls(cfg));
    } else {
      this.tlsServer = this.makeMaintenanceTls();
      await this.listen();
    }
  }

  // ---- fault controls -------------------------------------------------------------------

  setLatency(ms: number): void {
    this.latencyMs = Math.max(0, ms);
  }

  /** Accept TCP but never answer (no TLS, no replies), so callers run into their deadline. */
  blackhole(on: boolean): void {
    this.blackholed = on;
    if (!on) for (const release of [...this.parked]) release();
  }

  /** Close the port (connections refused) until restore(). */
  async refuse(): Promise<void> {
    await this.closeListener();
    this.destroyConnections();
  }

  async restore(): Promise<void> {
    if (!this.listener && this.phase !== 'stopped') await this.listen();
  }

  /** Destroy every open connection now. */
  destroyConnections(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  /** While on, each call that arrives kills the connections it came over instead of answering. */
  dropConnectionsMidCall(on: boolean): void {
    this.dropMidCall = on;
  }

  /** LifecycleService/Upgrade's installer fails with `message` (exit code 1), as on a full disk; null clears. */
  failInstall(message: string | null): void {
    this.installFailure = message ?? undefined;
  }

  /** Answer `method` with a per-node metadata.error (as apid does for a failed node); null clears. */
  perNodeError(method: string, message: string | null): void {
    if (message === null) this.nodeErrors.delete(method);
    else this.nodeErrors.set(method, message);
  }

  setEtcdMembers(members: SimEtcdMember[]): void {
    this.etcdMembers = members;
  }

  setEtcdErrors(errors: string[]): void {
    this.etcdErrors = errors;
  }

  setServiceState(id: string, state: SimServiceState | null): void {
    if (state) this.serviceOverrides.set(id, state);
    else this.serviceOverrides.delete(id);
  }

  /** Calls `fn` with every config the node starts running (applied live or after a reboot); returns the unsubscribe. */
  onConfig(fn: (cfg: SimMachineConfig) => void): () => void {
    this.configListeners.add(fn);
    return () => void this.configListeners.delete(fn);
  }

  private configChanged(cfg: SimMachineConfig): void {
    for (const fn of [...this.configListeners]) fn(cfg);
  }

  waitForPhase(phase: SimPhase, timeoutMs = 5_000): Promise<void> {
    if (this.phase === phase) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = {
        phase,
        resolve: () => {
          clearTimeout(t);
          this.timers.delete(t);
          resolve();
        },
      };
      const t = this.timer(timeoutMs, () => {
        this.phaseWaiters.delete(waiter);
        reject(new Error(`sim ${this.address} did not reach phase ${phase} (is ${this.phase})`));
      });
      this.phaseWaiters.add(waiter);
    });
  }

  async stop(): Promise<void> {
    if (this.phase === 'stopped') return;
    this.setPhase('stopped');
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const release of [...this.parked]) release();
    await this.closeListener();
    this.destroyConnections();
    this.injector.destroy();
    this.grpcServer.forceShutdown();
    if (this.scratchDir) rmSync(this.scratchDir, { recursive: true, force: true });
  }

  // ---- network ----------------------------------------------------------------------------

  private timer(ms: number, fn: () => void): NodeJS.Timeout {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
    return t;
  }

  private sleep(ms: number): Promise<void> {
    return ms > 0 ? new Promise((r) => this.timer(ms, r)) : Promise.resolve();
  }

  private setPhase(phase: SimPhase): void {
    this.phase = phase;
    for (const w of [...this.phaseWaiters]) {
      if (w.phase === phase) {
        this.phaseWaiters.delete(w);
        w.resolve();
      }
    }
  }

  private async listen(): Promise<void> {
    const server = net.createServer((socket) => this.onConnection(socket));
    for (let attempt = 0; ; attempt++) {
      try {
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen({ host: this.host, port: this.port, exclusive: true }, () => {
            server.removeListener('error', reject);
            resolve();
          });
        });
        break;
      } catch (err) {
        if (attempt >= 20 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
        await this.sleep(25);
      }
    }
    server.on('error', () => {});
    this.listener = server;
    this.port = (server.address() as net.AddressInfo).port;
  }

  private closeListener(graceful = false): Promise<void> {
    const l = this.listener;
    this.listener = undefined;
    if (!l) return Promise.resolve();
    // close() waits for open connections, so end them as well.
    const closed = new Promise<void>((resolve) => l.close(() => resolve()));
    if (graceful) this.endConnections();
    else this.destroyConnections();
    return closed;
  }

  /**
   * GOAWAY to every session, so a call already answered also gets its trailers (grpc-js sends them
   * only once the reply's data is written, which a busy process can delay past a short timer);
   * whatever is still open after the grace is cut.
   */
  private endConnections(): void {
    this.injector.drain(DRAIN_GRACE_MS);
    const left = [...this.sockets];
    this.timer(DRAIN_GRACE_MS, () => {
      for (const s of left) s.destroy();
    });
  }

  private onConnection(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => {});
    if (this.blackholed || !this.tlsServer) {
      socket.pause();
      return;
    }
    this.tlsServer.emit('connection', socket);
  }

  private makeMaintenanceTls(): tls.Server {
    const server = tls.createServer({
      cert: this.maintenanceCert.certPem,
      key: this.maintenanceCert.keyPem,
      ALPNProtocols: ['h2'],
      minVersion: 'TLSv1.2',
    });
    return this.wireTls(server, false);
  }

  private makeConfiguredTls(pair: { certPem: string; keyPem: string }, issuerPem: string, caPem: string): tls.Server {
    const server = tls.createServer({
      // The chain OpenSSL sends for the certificate alone (it, then the issuing CA), handed over
      // whole: given the certificate alone, it finds that chain at every handshake by verifying the
      // certificate again, CPU that separate machines would not take from the product's cores.
      cert: pair.certPem.trimEnd() + '\n' + issuerPem,
      key: pair.keyPem,
      ca: caPem,
      requestCert: true,
      rejectUnauthorized: true,
      ALPNProtocols: ['h2'],
      minVersion: 'TLSv1.2',
    });
    return this.wireTls(server, true);
  }

  private wireTls(server: tls.Server, checkClientEku: boolean): tls.Server {
    // Node ends the socket itself after sending the alert; destroying it here would lose the alert.
    server.on('tlsClientError', () => {
      this.handshakes.rejected++;
    });
    server.on('secureConnection', (socket: tls.TLSSocket) => {
      socket.on('error', () => {});
      if (checkClientEku) {
        // apid requires ExtKeyUsage exactly [ClientAuth] on client certificates.
        // The X509Certificate view parses only what is asked of it; getPeerCertificate() converts
        // the whole certificate (fingerprints included) on every handshake.
        const peer = socket.getPeerX509Certificate();
        const eku = peer?.keyUsage ?? [];
        if (eku.length !== 1 || eku[0] !== OID_CLIENT_AUTH) {
          this.handshakes.rejected++;
          socket.destroy();
          return;
        }
        const key = `${socket.remoteAddress}:${socket.remotePort}`;
        this.peerRoles.set(key, organizationsOf(peer?.subject ?? ''));
        socket.once('close', () => this.peerRoles.delete(key));
      }
      this.handshakes.accepted++;
      this.injector.injectConnection(socket);
    });
    return server;
  }

  /**
   * Reboot: the port closes, then reopens after rebootMs with the node configured. The new boot's
   * TLS server is built while the node is down, as a machine does its boot work in its own
   * downtime: built after it, a sim process holding many nodes would bring them back one after
   * another, which separate machines never do.
   */
  private reboot(reason: string): void {
    this.reboots.push(reason);
    // Let the reply that triggered the reboot reach the caller first (a configured node also
    // stops its workloads first).
    this.timer(this.phase === 'maintenance' ? 10 : (this.opts.shutdownMs ?? 10), () => {
      if (this.phase === 'stopped') return;
      this.setPhase('down');
      const downAt = Date.now();
      const boot = this.prepareBoot();
      boot.catch(() => {});
      void this.closeListener(true).then(() => {
        // grpc-js's drain timer destroys every session it holds when it fires, new ones included,
        // so the node stays down until it has fired.
        const drainLeft = DRAIN_GRACE_MS + 20 - (Date.now() - downAt);
        this.timer(Math.max(this.rebootMs, drainLeft), () => {
          if (this.phase === 'stopped') return;
          this.bootTime = Math.max(this.bootTime + 1, Math.floor(Date.now() / 1000));
          void boot.then(({ cfg, server }) => this.enterConfigured(cfg, server)).catch(() => {});
        });
      });
    });
  }

  private requireConfig(data: Buffer): SimMachineConfig {
    const { v1alpha1 } = parseSimConfig(data);
    if (!v1alpha1) throw new SimConfigError('the config has no v1alpha1 document');
    if (!v1alpha1.caCertPem) throw new SimConfigError('machine.ca.crt is required');
    if (v1alpha1.type === 'controlplane' && !v1alpha1.caKeyPem) {
      throw new SimConfigError('issuing CA key is required for controlplane nodes');
    }
    if (v1alpha1.type === 'worker' && !this.opts.workerIssuer) {
      throw new SimConfigError('sim: a worker config needs opts.workerIssuer to stand in for trustd');
    }
    return v1alpha1;
  }

  /** Runs `cfg` and opens the port; the node counts as configured once it listens. */
  private async enterConfigured(cfg: SimMachineConfig, server: tls.Server): Promise<void> {
    this.config = cfg;
    if (cfg.hostname) this.hostname = cfg.hostname;
    if (this.pendingVersion) {
      this.version = this.pendingVersion;
      this.pendingVersion = undefined;
    }
    this.tlsServer = server;
    await this.listen();
    this.setPhase('configured');
    this.configChanged(cfg);
  }

  /** A fresh TLS server per boot: no session state (tickets) outlives a reboot, as on a real node. */
  private async configuredTls(cfg: SimMachineConfig): Promise<tls.Server> {
    const { pair, issuerPem, caPem } = await this.apidCert(cfg);
    return this.makeConfiguredTls(pair, issuerPem, caPem);
  }

  /** The config and TLS server the node comes back with after a reboot. */
  private async prepareBoot(): Promise<{ cfg: SimMachineConfig; server: tls.Server }> {
    const cfg = this.config;
    if (!cfg) throw new Error('no config');
    return { cfg, server: await this.configuredTls(cfg) };
  }

  /** The apid certificate this config gives the node (the hostname it names is the one the node will have). */
  private async apidCert(cfg: SimMachineConfig): Promise<{ pair: { certPem: string; keyPem: string }; issuerPem: string; caPem: string }> {
    const issuer = cfg.caKeyPem ? { certPem: cfg.caCertPem ?? '', keyPem: cfg.caKeyPem } : this.opts.workerIssuer;
    if (!issuer) throw new SimConfigError('no issuer for the apid certificate');
    // Talos puts every node address in apid's certificate (overlay ones too); the listening host is this node's.
    const pair = await this.apid.cert(issuer.certPem, issuer.keyPem, cfg.hostname ? cfg.hostname : this.hostname, [...cfg.certSANs, this.host]);
    return { pair, issuerPem: issuer.certPem, caPem: cfg.caCertPem ?? issuer.certPem };
  }

  // ---- authorization ----------------------------------------------------------------------

  private rolesOf(call: SurfaceCall): string[] {
    return this.peerRoles.get(call.getPeer()) ?? rolesOfSubject(call.getAuthContext()?.sslPeerCertificate?.subject?.O);
  }

  private authorize(method: string, roles: string[]): void {
    const isNewApi = method.startsWith('ImageService/') || method.startsWith('LifecycleService/');
    if (isNewApi && !atLeast(this.version, 1, 13)) {
      throw new SimRpcError(grpc.status.UNIMPLEMENTED, `unknown service machine.${method.split('/')[0]}`);
    }
    const need = METHOD_ROLE[method] ?? 'admin';
    if (this.phase === 'maintenance') {
      if (!atLeast(this.version, 1, 13)) {
        // v1.12's separate maintenance server: ApplyConfiguration and the COSI state (talosctl get --insecure).
        if (method === 'ApplyConfiguration' || method.startsWith('cosi.resource.State/')) return;
        throw new SimRpcError(grpc.status.UNIMPLEMENTED, 'API is not implemented in maintenance mode');
      }
      // v1.13+: everyone is os:reader; ApplyConfiguration is let through while in maintenance.
      if (method === 'ApplyConfiguration' || need === 'reader') return;
      throw new SimRpcError(grpc.status.PERMISSION_DENIED, 'not authorized');
    }
    const have = Math.max(0, ...roles.map((r) => {
      const role = ROLE_OF_CERT[r];
      return role ? ROLE_RANK[role] : 0;
    }));
    if (have < ROLE_RANK[need]) throw new SimRpcError(grpc.status.PERMISSION_DENIED, 'not authorized');
  }

  /** Shared entry for every RPC: call log, faults, latency, authorization. Resolves false to stay silent. */
  private async admit(method: string, call: SurfaceCall): Promise<boolean> {
    const roles = this.rolesOf(call);
    this.calls.push({ method, phase: this.phase, roles });
    if (this.dropMidCall) {
      this.destroyConnections();
      return false;
    }
    if (this.blackholed) {
      await new Promise<void>((resolve) => {
        const release = (): void => {
          this.parked.delete(release);
          resolve();
        };
        this.parked.add(release);
        call.once('cancelled', release);
      });
      if (this.phase === 'stopped' || call.cancelled) return false;
    }
    await this.sleep(this.latencyMs);
    if (this.phase === 'stopped' || call.cancelled) return false;
    this.authorize(method, roles);
    return true;
  }

  private unary(method: string, handler: (req: Raw) => Raw | Promise<Raw>): grpc.handleUnaryCall<Raw, Raw> {
    return (call, callback) => {
      void (async () => {
        try {
          if (!(await this.admit(method, call))) return;
          const nodeError = this.nodeErrors.get(method);
          if (nodeError !== undefined) {
            callback(null, { messages: [{ metadata: { hostname: this.host, error: nodeError, status: { code: grpc.status.UNKNOWN, message: nodeError } } }] });
            return;
          }
          callback(null, { messages: [await handler(call.request)] });
        } catch (err) {
          callback(this.toStatus(err));
        }
      })();
    };
  }

  private serverStream(method: string, handler: (call: grpc.ServerWritableStream<Raw, Raw>) => Promise<void>): grpc.handleServerStreamingCall<Raw, Raw> {
    return (call) => {
      void (async () => {
        try {
          if (!(await this.admit(method, call))) return;
          await handler(call);
          call.end();
        } catch (err) {
          // grpc-js sends an 'error' event's status as the stream's final status.
          call.emit('error', this.toStatus(err));
        }
      })();
    };
  }

  private toStatus(err: unknown): { code: grpc.status; details: string } {
    if (err instanceof SimRpcError) return { code: err.code, details: err.message };
    if (err instanceof SimConfigError) return { code: grpc.status.INVALID_ARGUMENT, details: err.message };
    return { code: grpc.status.INTERNAL, details: err instanceof Error ? err.message : String(err) };
  }

  // ---- MachineService ---------------------------------------------------------------------

  private machineHandlers(): grpc.UntypedServiceImplementation {
    return {
      ApplyConfiguration: this.unary('ApplyConfiguration', (r) => this.applyConfiguration(r)),
      Bootstrap: this.unary('Bootstrap', (r) => this.bootstrap(r)),
      Version: this.unary('Version', () => this.versionMessage()),
      Hostname: this.unary('Hostname', () => ({ hostname: this.hostname })),
      ServiceList: this.unary('ServiceList', () => ({ services: this.services() })),
      Memory: this.unary('Memory', () => ({ meminfo: this.meminfo() })),
      LoadAvg: this.unary('LoadAvg', () => ({ load1: 0.42, load5: 0.37, load15: 0.3 })),
      SystemStat: this.unary('SystemStat', () => this.systemStat()),
      DiskStats: this.unary('DiskStats', () => this.diskStats()),
      EtcdMemberList: this.unary('EtcdMemberList', () => ({ members: this.members() })),
      EtcdStatus: this.unary('EtcdStatus', () => this.etcdStatus()),
      EtcdForfeitLeadership: this.unary('EtcdForfeitLeadership', () => this.forfeitLeadership()),
      EtcdAlarmList: this.unary('EtcdAlarmList', () => {
        this.members();
        return { member_alarms: this.etcdAlarms.map((a) => ({ member_id: a.memberId, alarm: a.alarm })) };
      }),
      EtcdAlarmDisarm: this.unary('EtcdAlarmDisarm', () => {
        this.members();
        // An empty member asks etcd to disarm every alarm; the reply lists those it disarmed.
        const disarmed = this.etcdAlarms.splice(0);
        return { member_alarms: disarmed.map((a) => ({ member_id: a.memberId, alarm: a.alarm })) };
      }),
      EtcdDefragment: this.unary('EtcdDefragment', async () => {
        this.members();
        this.defragmentations.push(Date.now());
        if (this.defragmentMs > 0) await new Promise((r) => setTimeout(r, this.defragmentMs));
        this.etcdDbSize = this.etcdDbSizeInUse;
        return {};
      }),
      EtcdSnapshot: this.serverStream('EtcdSnapshot', (c) => this.etcdSnapshot(c)),
      EtcdRecover: this.etcdRecover(),
      Mounts: this.unary('Mounts', () => ({ stats: this.mounts.map((m) => ({ filesystem: m.filesystem, size: String(m.size), available: String(m.available), mounted_on: m.mountedOn })) })),
      Upgrade: this.unary('Upgrade', (r) => this.legacyUpgrade(r)),
      Reboot: this.unary('Reboot', () => this.rebootCall()),
    };
  }

  private async applyConfiguration(req: Raw): Promise<Raw> {
    const data = Buffer.from((req['data'] as Buffer | undefined) ?? Buffer.alloc(0));
    const mode = String(req['mode'] ?? 'REBOOT');
    const dryRun = req['dry_run'] === true;
    const tmo = req['try_mode_timeout'] as { seconds?: string; nanos?: number } | null | undefined;
    const tryModeTimeoutMs = tmo ? Number(tmo.seconds ?? 0) * 1000 + Math.floor((tmo.nanos ?? 0) / 1e6) : undefined;
    const phase = this.phase;
    this.receivedConfigs.push({ data, mode, dryRun, tryModeTimeoutMs, phase });
    const v113 = atLeast(this.version, 1, 13);

    if (phase === 'maintenance') {
      if (!v113 && (mode === 'NO_REBOOT' || mode === 'STAGED')) {
        throw new SimRpcError(grpc.status.UNIMPLEMENTED, `apply configuration mode ${mode.toLowerCase()} is not supported in maintenance mode`);
      }
      if (dryRun) {
        parseSimConfig(data);
        return { mode, mode_details: 'Dry run summary:\nNode is running in maintenance mode and does not have a config yet.' };
      }
      const cfg = this.requireConfig(data);
      if (mode === 'STAGED') {
        this.stagedConfig = data;
        return { mode, mode_details: 'Staged configuration to be applied after the next reboot' };
      }
      // Fail at apply time, like a node that cannot use the CA, rather than after the reboot; the
      // certificate is the one the node comes back with.
      await this.apidCert(cfg);
      this.config = cfg;
      this.reboot('apply-configuration');
      const chosen = v113 && mode === 'REBOOT' ? 'NO_REBOOT' : mode;
      return { mode: chosen, mode_details: 'Applied configuration, node is installing and rebooting' };
    }

    if (dryRun) {
      parseSimConfig(data);
      return { mode, mode_details: 'Dry run summary:\nConfig diff:\n(no secrets shown)' };
    }
    const cfg = this.requireConfig(data);
    switch (mode) {
      case 'STAGED':
        this.stagedConfig = data;
        return { mode, mode_details: 'Staged configuration to be applied after the next reboot' };
      case 'REBOOT':
        if (atLeast(this.version, 1, 14)) throw new SimRpcError(grpc.status.UNIMPLEMENTED, 'the REBOOT mode is not supported');
        this.config = cfg;
        this.reboot('apply-configuration');
        return { mode, mode_details: 'Applied configuration with a reboot' };
      case 'TRY': {
        const previous = this.config;
        this.applyLive(cfg);
        this.timer(tryModeTimeoutMs ?? 60_000, () => {
          if (previous) this.applyLive(previous);
        });
        return { mode, mode_details: `Applied configuration in try mode, rollback in ${Math.round((tryModeTimeoutMs ?? 60_000) / 1000)}s` };
      }
      default:
        this.applyLive(cfg);
        return { mode: 'NO_REBOOT', mode_details: 'Applied configuration without a reboot' };
    }
  }

  private applyLive(cfg: SimMachineConfig): void {
    this.config = cfg;
    if (cfg.hostname) this.hostname = cfg.hostname;
    this.configChanged(cfg);
  }

  private bootstrap(req: Raw): Raw {
    if (this.config?.type !== 'controlplane') {
      throw new SimRpcError(grpc.status.FAILED_PRECONDITION, 'bootstrap is not available on worker nodes');
    }
    this.bootstrapCalls.push(Date.now());
    if (this.bootstrapped) throw new SimRpcError(grpc.status.ALREADY_EXISTS, 'etcd data directory is not empty');
    if (req['recover_etcd'] === true) {
      // Upstream looks for the file EtcdRecover wrote and refuses without it.
      const path = this.recoverFile;
      if (!path) throw new SimRpcError(grpc.status.FAILED_PRECONDITION, 'etcd snapshot for recovery not found');
      // etcd's restore checks the trailing SHA-256 (Talos does not skip it unless asked) and keeps the database before it.
      const size = statSync(path).size;
      const hashed = size % 512 === 32;
      if (req['recover_skip_hash_check'] !== true) {
        if (!hashed) throw new SimRpcError(grpc.status.INTERNAL, 'snapshot missing hash but --skip-hash-check=false');
        const { digest, trailer } = hashFile(path, size - 32);
        if (!digest.equals(trailer)) throw new SimRpcError(grpc.status.INTERNAL, 'expected sha256 does not match the snapshot');
      }
      this.recoveredPath = path;
      this.etcdDb = { path, bytes: hashed ? size - 32 : size };
      this.recoverFile = undefined;
    }
    this.bootstrapped = true;
    return {};
  }

  /** Sets which member this node's etcd reports as leader. */
  setEtcdLeader(memberId: string | undefined): void {
    this.etcdLeader = memberId;
  }

  private forfeitLeadership(): Raw {
    const members = this.members();
    const self = members.find((m) => m['hostname'] === this.hostname) ?? members[0];
    const selfId = String(self?.['id'] ?? '');
    const leader = this.etcdLeader ?? String(members[0]?.['id'] ?? '');
    // Only a leader moves leadership; a follower answers with an empty member, as upstream does.
    if (leader !== selfId) return { member: '' };
    const next = members.find((m) => String(m['id']) !== selfId);
    if (next) this.etcdLeader = String(next['id']);
    return { member: this.hostname };
  }

  /** The file EtcdSnapshot streams: the database, then etcd's SHA-256 of it. */
  etcdSnapshotFile(): Buffer {
    return Buffer.concat([this.etcdData, createHash('sha256').update(this.etcdData).digest()]);
  }

  private async etcdSnapshot(call: grpc.ServerWritableStream<Raw, Raw>): Promise<void> {
    this.members();
    const chunk = this.snapshotChunkBytes;
    // Written as the client takes it (flow control), and from etcdData itself: a large database is not copied.
    const send = async (bytes: Buffer): Promise<void> => {
      if (call.cancelled) throw new SimRpcError(grpc.status.CANCELLED, 'cancelled');
      if (!call.write({ bytes })) {
        await new Promise<void>((resolve) => {
          const go = (): void => {
            call.off('drain', go);
            call.off('cancelled', go);
            resolve();
          };
          call.on('drain', go);
          call.on('cancelled', go);
        });
      }
    };
    if (this.snapshotFault === undefined || this.snapshotFault === 'cut') {
      const data = this.etcdData;
      const stopAt = this.snapshotFault === 'cut' ? Math.floor(data.length / 2) : Infinity;
      for (let i = 0; i < data.length; i += chunk) {
        if (i >= stopAt) throw new SimRpcError(grpc.status.UNAVAILABLE, 'etcd snapshot stream cut off');
        await send(data.subarray(i, i + chunk));
      }
      await send(createHash('sha256').update(data).digest());
      return;
    }
    let file = this.etcdSnapshotFile();
    if (this.snapshotFault === 'truncated') file = file.subarray(0, file.length - 1024);
    if (this.snapshotFault === 'corrupt') file = Buffer.concat([file.subarray(0, 100), Buffer.from([file[100]! ^ 0xff]), file.subarray(101)]);
    for (let i = 0; i < file.length; i += chunk) await send(file.subarray(i, i + chunk));
  }

  /**
   * MachineService/EtcdRecover: the upload goes to a file as it arrives, taken no faster than the
   * disk writes it (the stream is paused meanwhile, so HTTP/2 flow control holds the client).
   */
  private etcdRecover(): grpc.handleClientStreamingCall<Raw, Raw> {
    return (call, callback) => {
      this.scratchDir ??= mkdtempSync(join(tmpdir(), 'rezus-sim-etcd-'));
      const path = join(this.scratchDir, `recover-${randomUUID()}.snapshot`);
      const file = createWriteStream(path);
      let failed: Error | undefined;
      file.on('error', (err) => (failed = err));
      call.on('cancelled', () => file.destroy());
      call.on('data', (m: Raw) => {
        const b = m['bytes'] as Buffer | undefined;
        if (b?.length && !file.write(b)) {
          call.pause();
          file.once('drain', () => call.resume());
        }
      });
      call.on('end', () => {
        void (async () => {
          try {
            await new Promise<void>((resolve) => file.end(resolve));
            if (failed) throw failed;
            if (!(await this.admit('EtcdRecover', call as unknown as SurfaceCall))) return;
            if (!this.isControlPlane()) throw new SimRpcError(grpc.status.FAILED_PRECONDITION, 'etcd is not running on worker nodes');
            if (this.bootstrapped) throw new SimRpcError(grpc.status.FAILED_PRECONDITION, 'etcd is already running: recovery is only possible before bootstrap');
            this.recoverFile = path;
            callback(null, { messages: [{}] });
          } catch (err) {
            callback(this.toStatus(err));
          }
        })();
      });
    };
  }

  private versionMessage(): Raw {
    return {
      version: { tag: this.version, sha: 'a1b2c3d4', built: '', go_version: 'go1.24.9', os: 'linux', arch: 'amd64' },
      platform: { name: 'metal', mode: 'metal' },
      features: { rbac: true },
    };
  }

  private isControlPlane(): boolean {
    return this.config?.type === 'controlplane';
  }

  private etcdRunning(): boolean {
    return this.isControlPlane() && (this.bootstrapped || this.etcdMembers !== undefined);
  }

  private services(): Raw[] {
    const now = { seconds: String(Math.floor(Date.now() / 1000)), nanos: 0 };
    const base: Record<string, SimServiceState> = {
      apid: { state: 'Running', healthy: true },
      machined: { state: 'Running', healthy: true },
      containerd: { state: 'Running', healthy: true },
      udevd: { state: 'Running', healthy: true },
    };
    if (this.phase === 'configured') {
      base['cri'] = { state: 'Running', healthy: true };
      base['kubelet'] = this.etcdRunning() || !this.isControlPlane() ? { state: 'Running', healthy: true } : { state: 'Running', healthy: false, lastMessage: 'waiting for API server' };
      if (this.isControlPlane()) {
        base['trustd'] = { state: 'Running', healthy: true };
        base['etcd'] = this.etcdRunning() ? { state: 'Running', healthy: true } : { state: 'Preparing', healthy: false, unknown: true, lastMessage: 'Waiting for bootstrap' };
      }
    }
    for (const [id, s] of this.serviceOverrides) base[id] = s;
    return Object.entries(base)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([id, s]) => ({
        id,
        state: s.state,
        events: { events: [{ msg: `Service ${s.state.toLowerCase()}`, state: s.state, ts: now }] },
        health: { unknown: s.unknown === true, healthy: s.healthy, last_message: s.lastMessage ?? '', last_change: now },
      }));
  }

  private meminfo(): Raw {
    const total = 8_148_000;
    return { memtotal: String(total), memfree: '5100000', memavailable: '6900000', buffers: '120000', cached: '1500000', swaptotal: '0', swapfree: '0', shmem: '20000', slab: '180000', hugepagesize: '2048' };
  }

  private systemStat(): Raw {
    const cpu = (i: number): Raw => ({ user: 1200.5 + i, nice: 0, system: 300.25, idle: 90000 + i, iowait: 12.5, irq: 0, soft_irq: 4.5, steal: 0, guest: 0, guest_nice: 0 });
    return {
      boot_time: String(this.bootTime),
      cpu_total: cpu(0),
      cpu: [cpu(0), cpu(1)],
      irq_total: '1234567',
      context_switches: '98765432',
      process_created: '45678',
      process_running: '3',
      process_blocked: '0',
      soft_irq_total: '765432',
    };
  }

  private diskStats(): Raw {
    const disk = (name: string, scale: number): Raw => ({
      name, read_completed: String(1000 * scale), read_sectors: String(64000 * scale), read_time_ms: String(500 * scale),
      write_completed: String(2000 * scale), write_sectors: String(128000 * scale), write_time_ms: String(900 * scale),
      io_in_progress: '0', io_time_ms: String(1200 * scale), io_time_weighted_ms: String(1400 * scale),
    });
    return { total: disk('total', 2), devices: [disk('sda', 1), disk('nvme0n1', 1)] };
  }

  private members(): Raw[] {
    if (!this.isControlPlane()) throw new SimRpcError(grpc.status.FAILED_PRECONDITION, 'etcd is not running on worker nodes');
    if (!this.etcdRunning()) throw new SimRpcError(grpc.status.FAILED_PRECONDITION, 'etcd is not ready: waiting for bootstrap');
    const list = this.etcdMembers ?? [{ id: memberIdFor(this.hostname), hostname: this.hostname }];
    return list.map((m) => ({
      id: m.id,
      hostname: m.hostname,
      peer_urls: m.peerUrls ?? [`https://${this.host.includes(':') ? `[${this.host}]` : this.host}:2380`],
      client_urls: m.clientUrls ?? [`https://${this.host.includes(':') ? `[${this.host}]` : this.host}:2379`],
      is_learner: m.isLearner === true,
    }));
  }

  private etcdStatus(): Raw {
    const members = this.members();
    const self = members.find((m) => m['hostname'] === this.hostname) ?? members[0];
    const selfId = String(self?.['id'] ?? memberIdFor(this.hostname));
    return {
      member_status: {
        member_id: selfId, protocol_version: '3.5.0', storage_version: '3.5.0', db_size: String(this.etcdDbSize), db_size_in_use: String(this.etcdDbSizeInUse),
        leader: this.etcdLeader ?? String(members[0]?.['id'] ?? selfId), raft_index: String(this.etcdRaftIndex), raft_term: '3', raft_applied_index: '1024',
        errors: this.etcdErrors, is_learner: self?.['is_learner'] === true,
      },
    };
  }

  private legacyUpgrade(req: Raw): Raw {
    const image = String(req['image'] ?? '');
    if (!image) throw new SimRpcError(grpc.status.INVALID_ARGUMENT, 'image is required');
    const stage = req['stage'] === true;
    this.upgrades.push({ api: 'legacy', image, stage });
    // machined answers before its upgrade sequence runs the installer, so a pre-flight refusal never
    // reaches the caller: the sequence stops there and the node stays up on its old version, not
    // rebooting (upstream has by then drained it and stopped its pods, which the sim does not model).
    // Staged, the installer fails early in the next boot; machined reboots once more with the staged
    // tag already dropped, so the node comes back on its old version.
    if (preflightRefusal(this.version, image)) return { ack: 'Upgrade request received', actor_id: randomUUID() };
    this.pendingVersion = versionFromImage(image) ?? this.version;
    if (!stage) this.reboot('upgrade');
    return { ack: 'Upgrade request received', actor_id: randomUUID() };
  }

  private rebootCall(): Raw {
    this.reboot('reboot');
    return { actor_id: randomUUID() };
  }

  // ---- cosi.resource.State ------------------------------------------------------------------

  /** The resources of (namespace, type) after the access policy; the bootstrap manifests and the running config are modelled. */
  private cosiResources(req: Raw, roles: string[]): SimCosiResource[] {
    const namespace = String(req['namespace'] ?? '');
    const type = String(req['type'] ?? '');
    const refusal = cosiReadRefusal(namespace, type, this.phase !== 'maintenance' && roles.includes('os:admin'));
    if (refusal) throw new SimRpcError(refusal.code, refusal.message);
    if (type.toLowerCase() === MACHINE_CONFIG_TYPE.toLowerCase()) return namespace === 'config' ? this.machineConfig() : [];
    // A node renders them from the config it runs; one in maintenance has none.
    this.manifests.sync(this.phase === 'configured' ? this.config : undefined);
    return this.manifests.list().filter((r) => r.namespace === namespace && r.type === type);
  }

  private async cosiList(call: grpc.ServerWritableStream<Raw, Raw>): Promise<void> {
    for (const r of this.cosiResources(call.request, this.rolesOf(call))) call.write({ resource: toProtoResource(r) });
  }

  /**
   * MachineConfigs `v1alpha1`, the config the node runs. Its spec marshals to the config's bytes as
   * they were applied (a readonly container keeps them), so yaml_spec is one YAML string holding them.
   */
  private machineConfig(): SimCosiResource[] {
    const cfg = this.phase === 'configured' ? this.config : undefined;
    if (!cfg) return [];
    const prev = this.machineConfigResource;
    if (prev?.yamlSpec !== stringifyYaml(cfg.source)) {
      const now = new Date();
      this.machineConfigResource = {
        namespace: 'config',
        type: MACHINE_CONFIG_TYPE,
        id: 'v1alpha1',
        version: (prev?.version ?? 0) + 1,
        owner: '',
        phase: 'running',
        created: prev?.created ?? now,
        updated: now,
        yamlSpec: stringifyYaml(cfg.source),
      };
    }
    return [this.machineConfigResource!];
  }

  // ---- ImageService / LifecycleService (v1.13+) ---------------------------------------------

  private async imagePull(call: grpc.ServerWritableStream<Raw, Raw>): Promise<void> {
    const image = String(call.request['image_ref'] ?? '');
    const ns = (call.request['containerd'] as Raw | null)?.['namespace'];
    if (!image) throw new SimRpcError(grpc.status.INVALID_ARGUMENT, 'image_ref is required');
    if (ns !== 'NS_SYSTEM' && ns !== 'NS_CRI') throw new SimRpcError(grpc.status.INVALID_ARGUMENT, `unknown containerd namespace ${String(ns)}`);
    call.write({ pull_progress: { layer_id: 'sha256:0001', progress: { status: 'DOWNLOADING', offset: '1048576', total: '4194304' } } });
    call.write({ pull_progress: { layer_id: 'sha256:0001', progress: { status: 'EXTRACT_COMPLETE', offset: '4194304', total: '4194304' } } });
    (ns === 'NS_CRI' ? this.pulledCriImages : this.pulledImages).push(image);
    call.write({ name: image });
  }

  private async lifecycleUpgrade(call: grpc.ServerWritableStream<Raw, Raw>): Promise<void> {
    const image = String((call.request['source'] as Raw | null)?.['image_name'] ?? '');
    this.upgrades.push({ api: 'lifecycle', image, stage: false });
    if (!this.pulledImages.includes(image)) {
      call.write({ progress: { message: `error: image ${image} not found in the system containerd namespace` } });
      call.write({ progress: { exit_code: 1 } });
      return;
    }
    // LifecycleService runs the installer without --force; the pre-flight would run anyway.
    const refusal = preflightRefusal(this.version, image);
    if (refusal) {
      for (const message of refusal) call.write({ progress: { message } });
      call.write({ progress: { exit_code: 1 } });
      return;
    }
    if (this.installFailure) {
      call.write({ progress: { message: 'validating installer image' } });
      call.write({ progress: { message: `error: ${this.installFailure}` } });
      call.write({ progress: { exit_code: 1 } });
      return;
    }
    for (const message of ['validating installer image', 'installing Talos to disk', 'upgrade installed, reboot to activate']) {
      call.write({ progress: { message } });
    }
    this.pendingVersion = versionFromImage(image) ?? this.version;
    call.write({ progress: { exit_code: 0 } });
  }
}

export async function startSimNode(opts: SimNodeOptions = {}): Promise<SimTalosNode> {
  const sim = new SimTalosNode(opts);
  try {
    await sim.start();
  } catch (err) {
    await sim.stop();
    throw err;
  }
  return sim;
}

/** SHA-256 of a file's first `bytes` bytes and the 32 after them, read a piece at a time. */
function hashFile(path: string, bytes: number): { digest: Buffer; trailer: Buffer } {
  const fd = openSync(path, 'r');
  try {
    const hash = createHash('sha256');
    const piece = Buffer.alloc(1024 * 1024);
    for (let at = 0; at < bytes; ) {
      const n = readSync(fd, piece, 0, Math.min(piece.length, bytes - at), at);
      if (n === 0) break;
      hash.update(piece.subarray(0, n));
      at += n;
    }
    const trailer = Buffer.alloc(32);
    readSync(fd, trailer, 0, 32, bytes);
    return { digest: hash.digest(), trailer };
  } finally {
    closeSync(fd);
  }
}
