import * as grpc from '@grpc/grpc-js';
import { createSecureContext, type SecureContext } from 'node:tls';
import { whenAborted } from './abort-fanout.ts';
import { formatNodeAddress, parseNodeAddress } from './address.ts';
import {
  applyModeFromProto, applyModeToProto, list, num, obj, str, strings,
  toDiskStats, toEtcdMembers, toEtcdStatus, toMemInfo, toServices, toSystemStat, toVersion, type Raw,
} from './convert.ts';
import { codeForStatus, grpcStatusName, sanitizeDetail, TalosApiError, type TalosApiErrorCode } from './errors.ts';
import { parseFingerprint } from './fingerprint.ts';
import { loadTalosServices } from './proto-loader.ts';
import { normalizePrivateKeyPem, TalosChannelCredentials, type TalosTlsOptions } from './tls-connector.ts';
import type {
  ApplyConfigurationInput, ApplyConfigurationResult, CallOptions, DiskStatsResult, EtcdMember, EtcdMemberStatus,
  ImagePullProgress, LegacyUpgradeInput, LegacyUpgradeResult, LifecycleUpgradeInput, LifecycleUpgradeResult,
  LoadAvgResult, MemInfo, MountStat, ServiceInfo, SystemStatResult, VersionResult,
} from './types.ts';

export const DEFAULT_UNARY_DEADLINE_MS = 10_000;
export const DEFAULT_STREAM_DEADLINE_MS = 15 * 60_000;
/** constants.GRPCMaxMessageSize upstream. */
const MAX_MESSAGE_BYTES = 32 * 1024 * 1024;

type Pem = string | Uint8Array;

export type TalosClientOptions =
  | {
      /** Node booted without config: TLS without client cert, server cert optionally pinned. */
      mode: 'maintenance';
      address: string;
      /** SHA-256 fingerprint printed on the node console (base64 SPKI) or hex; unpinned if absent. */
      fingerprint?: string;
    }
  | {
      /** Configured node: mTLS with the cluster's admin client certificate, server verified against the OS CA. */
      mode: 'configured';
      address: string;
      ca: Pem;
      cert: Pem;
      key: Pem;
      /** Name to verify the server certificate against when the dialed address is not in its SANs. */
      serverName?: string;
      /** A context from createTalosSecureContext(ca, cert, key), reused across many clients of one identity. */
      secureContext?: SecureContext;
    };

/** The talosctl default containerd instance for installer images. */
const SYSTEM_CONTAINERD = { driver: 'CRI', namespace: 'NS_SYSTEM' };
/** Where the kubelet's pods (static pods included) take their images from. */
const CRI_CONTAINERD = { driver: 'CRI', namespace: 'NS_CRI' };

const TRANSPORT_DOWN = /No connection established|ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|getaddrinfo|Name resolution failed|connect E/;

function pemBuffer(p: Pem): Buffer {
  return Buffer.from(typeof p === 'string' ? p : Buffer.from(p).toString('utf8'));
}

type UnaryFn = (req: object, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Raw) => void) => grpc.ClientUnaryCall;
type ClientStreamFn = (md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Raw) => void) => grpc.ClientWritableStream<Raw>;
type StreamFn = (req: object, md: grpc.Metadata, opts: grpc.CallOptions) => grpc.ClientReadableStream<Raw>;

export class TalosApiClient {
  /** `host:port` of the node, IPv6 bracketed; named in every error. */
  readonly node: string;
  readonly mode: 'maintenance' | 'configured';
  private readonly creds: TalosChannelCredentials;
  private readonly machine: grpc.Client;
  private readonly channelOptions: grpc.ChannelOptions;
  // Made on first use, on the machine client's channel: most clients (a collect pass's) never
  // pull an image or upgrade, and each grpc-js client costs its setup.
  private imageClient: grpc.Client | undefined;
  private lifecycleClient: grpc.Client | undefined;

  constructor(opts: TalosClientOptions) {
    const addr = parseNodeAddress(opts.address);
    this.node = formatNodeAddress(addr);
    this.mode = opts.mode;
    let tlsOpts: TalosTlsOptions;
    if (opts.mode === 'maintenance') {
      tlsOpts = { kind: 'maintenance', host: addr.host, ...(opts.fingerprint ? { pin: parseFingerprint(opts.fingerprint) } : {}) };
    } else {
      tlsOpts = {
        kind: 'configured',
        host: addr.host,
        ...(opts.serverName ? { serverName: opts.serverName } : {}),
        ca: pemBuffer(opts.ca),
        cert: pemBuffer(opts.cert),
        key: Buffer.from(normalizePrivateKeyPem(pemBuffer(opts.key).toString('utf8'))),
        ...(opts.secureContext ? { secureContext: opts.secureContext } : {}),
      };
    }
    this.creds = new TalosChannelCredentials(tlsOpts);
    const services = loadTalosServices();
    const channelOptions: grpc.ChannelOptions = {
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
      // Nodes reboot often during provisioning; retry the connection soon after they return.
      'grpc.initial_reconnect_backoff_ms': 250,
      'grpc.max_reconnect_backoff_ms': 5_000,
      // Channelz keeps per-channel, per-subchannel and per-call statistics for an admin service
      // this process never serves; without it a client is cheaper to set up and to call through.
      'grpc.enable_channelz': 0,
    };
    this.machine = new services.MachineServiceClient(this.node, this.creds, channelOptions);
    this.channelOptions = channelOptions;
  }

  private sharedChannel(): grpc.ClientOptions {
    return { ...this.channelOptions, channelOverride: this.machine.getChannel() } as grpc.ClientOptions;
  }

  private get image(): grpc.Client {
    return (this.imageClient ??= new (loadTalosServices().ImageServiceClient)(this.node, this.creds, this.sharedChannel()));
  }

  private get lifecycle(): grpc.Client {
    return (this.lifecycleClient ??= new (loadTalosServices().LifecycleServiceClient)(this.node, this.creds, this.sharedChannel()));
  }

  async applyConfiguration(input: ApplyConfigurationInput, opts?: CallOptions): Promise<ApplyConfigurationResult> {
    const req: Raw = {
      data: Buffer.from(input.data.buffer, input.data.byteOffset, input.data.byteLength),
      mode: applyModeToProto(input.mode),
      dry_run: input.dryRun === true,
    };
    if (input.tryModeTimeoutMs !== undefined) {
      const ms = Math.max(0, Math.round(input.tryModeTimeoutMs));
      req['try_mode_timeout'] = { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 };
    }
    const m = await this.first('MachineService', 'ApplyConfiguration', req, opts);
    return { mode: applyModeFromProto(m['mode']), modeDetails: str(m['mode_details']), warnings: strings(m['warnings']) };
  }

  async bootstrap(opts?: CallOptions & { recoverEtcd?: boolean; recoverSkipHashCheck?: boolean }): Promise<void> {
    await this.first('MachineService', 'Bootstrap', { recover_etcd: opts?.recoverEtcd === true, recover_skip_hash_check: opts?.recoverSkipHashCheck === true }, opts);
  }

  async version(opts?: CallOptions): Promise<VersionResult> {
    return toVersion(await this.first('MachineService', 'Version', {}, opts));
  }

  async hostname(opts?: CallOptions): Promise<string> {
    return str((await this.first('MachineService', 'Hostname', {}, opts))['hostname']);
  }

  async serviceList(opts?: CallOptions): Promise<ServiceInfo[]> {
    return toServices(await this.first('MachineService', 'ServiceList', {}, opts));
  }

  async memory(opts?: CallOptions): Promise<MemInfo> {
    return toMemInfo(await this.first('MachineService', 'Memory', {}, opts));
  }

  async loadAvg(opts?: CallOptions): Promise<LoadAvgResult> {
    const m = await this.first('MachineService', 'LoadAvg', {}, opts);
    return { load1: num(m['load1']), load5: num(m['load5']), load15: num(m['load15']) };
  }

  async systemStat(opts?: CallOptions): Promise<SystemStatResult> {
    return toSystemStat(await this.first('MachineService', 'SystemStat', {}, opts));
  }

  async diskStats(opts?: CallOptions): Promise<DiskStatsResult> {
    return toDiskStats(await this.first('MachineService', 'DiskStats', {}, opts));
  }

  async etcdMemberList(opts?: CallOptions & { queryLocal?: boolean }): Promise<EtcdMember[]> {
    return toEtcdMembers(await this.first('MachineService', 'EtcdMemberList', { query_local: opts?.queryLocal === true }, opts));
  }

  async etcdStatus(opts?: CallOptions): Promise<EtcdMemberStatus> {
    return toEtcdStatus(await this.first('MachineService', 'EtcdStatus', {}, opts));
  }

  /** MachineService/Mounts: every mounted filesystem with its size and free bytes. */
  async mounts(opts?: CallOptions): Promise<MountStat[]> {
    const m = await this.first('MachineService', 'Mounts', {}, opts);
    return list(m['stats']).map((x) => ({ filesystem: str(x['filesystem']), size: num(x['size']), available: num(x['available']), mountedOn: str(x['mounted_on']) }));
  }

  /** Asks this control plane's etcd member to hand its leadership to a peer; resolves with the member name. */
  async etcdForfeitLeadership(opts?: CallOptions): Promise<{ member: string }> {
    return { member: str((await this.first('MachineService', 'EtcdForfeitLeadership', {}, opts))['member']) };
  }

  /** MachineService/EtcdSnapshot: streams the local etcd member's snapshot (a bbolt db file) chunk by chunk. */
  async etcdSnapshot(onChunk: (chunk: Buffer) => void, opts?: CallOptions): Promise<void> {
    await this.stream(this.machine, 'MachineService', 'EtcdSnapshot', {}, opts, (msg) => {
      const b = msg['bytes'];
      if (b && (b as Buffer).length) onChunk(Buffer.from(b as Buffer));
    });
  }

  /** MachineService/EtcdRecover (client stream): uploads a snapshot for a later Bootstrap with recoverEtcd. */
  etcdRecover(data: Uint8Array, opts?: CallOptions & { chunkBytes?: number }): Promise<void> {
    const label = 'MachineService/EtcdRecover';
    return new Promise((resolve, reject) => {
      const signal = opts?.signal;
      if (signal?.aborted) return reject(this.error(label, 'canceled', 'CANCELLED', 'aborted before the call started'));
      const fn = (this.machine as unknown as Record<string, ClientStreamFn>)['EtcdRecover'];
      if (!fn) return reject(this.error(label, 'unimplemented', 'UNIMPLEMENTED', 'method not in the client protos'));
      const deadline = Date.now() + (opts?.deadlineMs ?? DEFAULT_STREAM_DEADLINE_MS);
      const onAbort = (): void => call.cancel();
      const call = fn.call(this.machine, new grpc.Metadata(), { deadline }, (err, res) => {
        signal?.removeEventListener('abort', onAbort);
        if (err) return reject(this.fromServiceError(label, err));
        const md = obj(list(res?.['messages'])[0]?.['metadata']);
        if (md && str(md['error']) !== '') return reject(this.error(label, 'node-error', 'OK', sanitizeDetail(str(md['error']))));
        resolve();
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      const size = opts?.chunkBytes ?? 1024 * 1024;
      for (let i = 0; i < data.byteLength; i += size) call.write({ bytes: Buffer.from(data.subarray(i, i + size)) });
      call.end();
    });
  }

  /** MachineService/Upgrade: deprecated since v1.13 but the only path on older nodes. The node reboots itself. */
  async legacyUpgrade(input: LegacyUpgradeInput, opts?: CallOptions): Promise<LegacyUpgradeResult> {
    const m = await this.first('MachineService', 'Upgrade', {
      image: input.image,
      preserve: input.preserve === true,
      stage: input.stage === true,
      force: input.force === true,
      reboot_mode: 'DEFAULT',
    }, opts);
    return { ack: str(m['ack']), actorId: str(m['actor_id']) };
  }

  /**
   * ImageService/Pull (v1.13+) into the system containerd namespace (installer, kubelet), or with
   * `namespace: 'cri'` into the one Kubernetes pods run from; resolves with the pulled image name.
   */
  async imagePull(input: { image: string; namespace?: 'system' | 'cri' }, opts?: CallOptions & { onProgress?: (p: ImagePullProgress) => void }): Promise<{ name: string }> {
    let name = '';
    const containerd = input.namespace === 'cri' ? CRI_CONTAINERD : SYSTEM_CONTAINERD;
    await this.stream(this.image, 'ImageService', 'Pull', { containerd, image_ref: input.image }, opts, (msg) => {
      if (msg['response'] === 'name') name = str(msg['name']);
      else if (msg['response'] === 'pull_progress' && opts?.onProgress) {
        const p = obj(msg['pull_progress']) ?? {};
        const lp = obj(p['progress']) ?? {};
        opts.onProgress({ layerId: str(p['layer_id']), status: str(lp['status']), offset: num(lp['offset']), total: num(lp['total']) });
      }
    });
    if (!name) throw this.error('ImageService/Pull', 'protocol', 'OK', 'stream ended without the pulled image name');
    return { name };
  }

  /**
   * LifecycleService/Upgrade (v1.13+): installs the pulled image to disk. The node does not
   * reboot on its own; call reboot() afterwards. Older nodes answer `unimplemented`.
   */
  async lifecycleUpgrade(input: LifecycleUpgradeInput, onProgress?: (message: string) => void, opts?: CallOptions): Promise<LifecycleUpgradeResult> {
    const messages: string[] = [];
    let exitCode: number | null = null;
    await this.stream(this.lifecycle, 'LifecycleService', 'Upgrade', { containerd: SYSTEM_CONTAINERD, source: { image_name: input.image } }, opts, (msg) => {
      const p = obj(msg['progress']);
      if (!p) return;
      if (p['response'] === 'message') {
        const text = str(p['message']);
        messages.push(text);
        onProgress?.(text);
      } else if (p['response'] === 'exit_code') {
        exitCode = num(p['exit_code']);
      }
    });
    if (exitCode === null) throw this.error('LifecycleService/Upgrade', 'protocol', 'OK', 'stream ended without an exit code');
    if (exitCode !== 0) {
      const last = messages.at(-1);
      throw this.error('LifecycleService/Upgrade', 'node-error', 'OK', `upgrade failed with exit code ${exitCode}${last ? `: ${sanitizeDetail(last)}` : ''}`);
    }
    return { exitCode, messages };
  }

  async reboot(opts?: CallOptions & { mode?: 'default' | 'powercycle' }): Promise<{ actorId: string }> {
    const m = await this.first('MachineService', 'Reboot', { mode: opts?.mode === 'powercycle' ? 'POWERCYCLE' : 'DEFAULT' }, opts);
    return { actorId: str(m['actor_id']) };
  }

  /**
   * Dials the node (if the channel is idle) and resolves once the channel is ready, or once the
   * attempt failed outright: the next call then fails at once with the reason (refused, TLS...).
   * Rejects with a `deadline` error when no connection is up within the deadline, e.g. a node that
   * accepts TCP but never completes the handshake. Lets a caller wait for many nodes' connections
   * at once and spend its call concurrency only on nodes that answer.
   */
  connect(opts?: CallOptions): Promise<void> {
    const label = 'connect';
    const channel = this.machine.getChannel();
    const budgetMs = opts?.deadlineMs ?? DEFAULT_UNARY_DEADLINE_MS;
    const deadline = Date.now() + budgetMs;
    const signal = opts?.signal;
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(this.error(label, 'canceled', 'CANCELLED', 'aborted before the call started'));
      let settled = false;
      const settle = (err?: TalosApiError): void => {
        if (settled) return;
        settled = true;
        stopAbort();
        if (err) reject(err);
        else resolve();
      };
      const stopAbort = whenAborted(signal, () => settle(this.error(label, 'canceled', 'CANCELLED', 'aborted while connecting')));
      const check = (): void => {
        if (settled) return;
        const state = channel.getConnectivityState(true);
        if (state === grpc.connectivityState.READY || state === grpc.connectivityState.TRANSIENT_FAILURE) return settle();
        if (state === grpc.connectivityState.SHUTDOWN) return settle(this.error(label, 'canceled', 'CANCELLED', 'client closed while connecting'));
        channel.watchConnectivityState(state, deadline, (err) => {
          if (err) settle(this.error(label, 'deadline', 'DEADLINE_EXCEEDED', `no connection within the ${budgetMs} ms deadline`));
          else check();
        });
      };
      check();
    });
  }

  close(): void {
    this.lifecycleClient?.close();
    this.imageClient?.close();
    this.machine.close();
    this.creds.destroyAll();
  }

  private error(method: string, code: TalosApiErrorCode, grpcStatus: string, detail: string): TalosApiError {
    return new TalosApiError({ node: this.node, method, code, grpcStatus, detail });
  }

  private fromServiceError(method: string, err: grpc.ServiceError): TalosApiError {
    const details = err.details ?? err.message ?? '';
    let code = codeForStatus(err.code);
    let detail = sanitizeDetail(details);
    if (err.code === grpc.status.UNAVAILABLE) {
      const failure = this.creds.lastFailure;
      const matches = failure && (details.includes(failure.message) || (failure.quiet === true && details.includes('Failed to connect')));
      if (failure && matches) {
        code = failure.kind;
        detail = sanitizeDetail(failure.message);
      } else if (!TRANSPORT_DOWN.test(details)) {
        code = 'connection-lost';
      }
    }
    return this.error(method, code, grpcStatusName(err.code), detail || grpcStatusName(err.code));
  }

  /** Unwraps `messages[0]`; a per-node `metadata.error` becomes an error for this node. */
  private async first(service: string, method: string, request: Raw, opts?: CallOptions): Promise<Raw> {
    const label = `${service}/${method}`;
    const res = await this.unary(label, method, request, opts);
    const m = list(res['messages'])[0];
    if (!m) throw this.error(label, 'protocol', 'OK', 'reply carried no messages');
    const md = obj(m['metadata']);
    if (md && str(md['error']) !== '') {
      const st = obj(md['status']);
      throw this.error(label, 'node-error', st ? grpcStatusName(num(st['code'])) : 'OK', sanitizeDetail(str(md['error'])));
    }
    return m;
  }

  private unary(label: string, method: string, request: Raw, opts?: CallOptions): Promise<Raw> {
    return new Promise((resolve, reject) => {
      const signal = opts?.signal;
      if (signal?.aborted) return reject(this.error(label, 'canceled', 'CANCELLED', 'aborted before the call started'));
      const fn = (this.machine as unknown as Record<string, UnaryFn>)[method];
      if (!fn) return reject(this.error(label, 'unimplemented', 'UNIMPLEMENTED', 'method not in the client protos'));
      const deadline = Date.now() + (opts?.deadlineMs ?? DEFAULT_UNARY_DEADLINE_MS);
      let done = (): void => {};
      const call = fn.call(this.machine, request, new grpc.Metadata(), { deadline }, (err, res) => {
        done();
        if (err) return reject(this.fromServiceError(label, err));
        this.creds.lastFailure = undefined;
        resolve(res ?? {});
      });
      done = whenAborted(signal, () => call.cancel());
    });
  }

  private stream(client: grpc.Client, service: string, method: string, request: Raw, opts: CallOptions | undefined, onMessage: (m: Raw) => void): Promise<void> {
    const label = `${service}/${method}`;
    return new Promise((resolve, reject) => {
      const signal = opts?.signal;
      if (signal?.aborted) return reject(this.error(label, 'canceled', 'CANCELLED', 'aborted before the call started'));
      const fn = (client as unknown as Record<string, StreamFn>)[method];
      if (!fn) return reject(this.error(label, 'unimplemented', 'UNIMPLEMENTED', 'method not in the client protos'));
      const deadline = Date.now() + (opts?.deadlineMs ?? DEFAULT_STREAM_DEADLINE_MS);
      const call = fn.call(client, request, new grpc.Metadata(), { deadline });
      let callbackError: unknown;
      const done = whenAborted(signal, () => call.cancel());
      call.on('data', (msg: Raw) => {
        if (callbackError !== undefined) return;
        try {
          onMessage(msg);
        } catch (e) {
          callbackError = e;
          call.cancel();
        }
      });
      call.on('error', (err: grpc.ServiceError) => {
        done();
        reject(callbackError !== undefined ? callbackError : this.fromServiceError(label, err));
      });
      call.on('end', () => {
        done();
        if (callbackError !== undefined) return reject(callbackError);
        this.creds.lastFailure = undefined;
        resolve();
      });
    });
  }
}

/** One TLS context for an mTLS identity, to share between the clients of a pass. */
export function createTalosSecureContext(ca: Pem, cert: Pem, key: Pem): SecureContext {
  return createSecureContext({ ca: pemBuffer(ca), cert: pemBuffer(cert), key: Buffer.from(normalizePrivateKeyPem(pemBuffer(key).toString('utf8'))), minVersion: 'TLSv1.2' });
}

export function createTalosClient(opts: TalosClientOptions): TalosApiClient {
  return new TalosApiClient(opts);
}
