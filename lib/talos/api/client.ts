import { createSecureContext, type SecureContext } from 'node:tls';
import type { DialGuard } from '../../dial-guard.ts';
import { formatNodeAddress, parseNodeAddress } from './address.ts';
import { CallFailure } from './call-failure.ts';
import {
  applyModeFromProto, applyModeToProto, list, num, obj, str, strings,
  toDiskStats, toEtcdAlarms, toEtcdMembers, toEtcdStatus, toMemInfo, toServices, toSystemStat, toVersion, type Raw,
} from './convert.ts';
import { sanitizeDetail, TalosApiError, type TalosApiErrorCode } from './errors.ts';
import { presentedChain } from './client-chain.ts';
import { toCosiResource } from './cosi.ts';
import { parseFingerprint } from './fingerprint.ts';
import { GrpcStatus, grpcStatusName } from './grpc-status.ts';
import { NodeChannel, type Connection } from './node-channel.ts';
import { loadTalosServices, type TalosServiceDefinitions } from './proto-loader.ts';
import { normalizePrivateKeyPem, type TalosTlsOptions } from './tls-connector.ts';
import type {
  ApplyConfigurationInput, ApplyConfigurationResult, CallOptions, CosiResource, DiskStatsResult, EtcdMember, EtcdMemberAlarm, EtcdMemberStatus,
  ImagePullProgress, LegacyUpgradeInput, LegacyUpgradeResult, LifecycleUpgradeInput, LifecycleUpgradeResult,
  LoadAvgResult, MemInfo, MountStat, ServiceInfo, SystemStatResult, VersionResult,
} from './types.ts';

export const DEFAULT_UNARY_DEADLINE_MS = 10_000;
export const DEFAULT_STREAM_DEADLINE_MS = 15 * 60_000;
/** constants.GRPCMaxMessageSize upstream. */
const MAX_MESSAGE_BYTES = 32 * 1024 * 1024;

type Pem = string | Uint8Array;

export type TalosClientOptions = (
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
    }
) & {
  /** Where the caller may dial (REZUS_NODE_NETWORKS): an address outside fails `not-allowed`, unsent. */
  guard?: DialGuard;
};

/** The talosctl default containerd instance for installer images. */
const SYSTEM_CONTAINERD = { driver: 'CRI', namespace: 'NS_SYSTEM' };
/** Where the kubelet's pods (static pods included) take their images from. */
const CRI_CONTAINERD = { driver: 'CRI', namespace: 'NS_CRI' };

function pemBuffer(p: Pem): Buffer {
  return Buffer.from(typeof p === 'string' ? p : Buffer.from(p).toString('utf8'));
}

/** The key PEM with a label OpenSSL reads (talosctl writes `ED25519 PRIVATE KEY`). */
function keyBuffer(p: Pem): Buffer {
  return Buffer.from(normalizePrivateKeyPem(pemBuffer(p).toString('utf8')));
}

/** COSI's service goes by its full name: `State` alone would say nothing in an error. */
type Service = 'MachineService' | 'ImageService' | 'LifecycleService' | 'cosi.resource.State';
const SERVICE_KEY: Record<Service, keyof Omit<TalosServiceDefinitions, 'packageDefinition'>> = {
  MachineService: 'machine',
  ImageService: 'image',
  LifecycleService: 'lifecycle',
  'cosi.resource.State': 'cosiState',
};

/**
 * What connect() came to: a ready channel (`reused` when its connection was up before, maybe
 * from an earlier use, so a node that rebooted since may no longer know it), or why the dial failed.
 */
export type TalosConnection = { reused: boolean; failure?: undefined } | { failure: TalosApiError; reused?: undefined };

export class TalosApiClient {
  /** `host:port` of the node, IPv6 bracketed; named in every error. */
  readonly node: string;
  readonly mode: 'maintenance' | 'configured';
  private readonly channel: NodeChannel;

  constructor(opts: TalosClientOptions) {
    const addr = parseNodeAddress(opts.address);
    this.node = formatNodeAddress(addr);
    this.mode = opts.mode;
    let tls: TalosTlsOptions;
    if (opts.mode === 'maintenance') {
      tls = { kind: 'maintenance', host: addr.host, ...(opts.fingerprint ? { pin: parseFingerprint(opts.fingerprint) } : {}) };
    } else {
      const ca = pemBuffer(opts.ca);
      tls = {
        kind: 'configured',
        host: addr.host,
        ...(opts.serverName ? { serverName: opts.serverName } : {}),
        ca,
        cert: opts.secureContext ? pemBuffer(opts.cert) : presentedChain(pemBuffer(opts.cert), ca),
        key: keyBuffer(opts.key),
        ...(opts.secureContext ? { secureContext: opts.secureContext } : {}),
      };
    }
    this.channel = new NodeChannel({ host: addr.host, port: addr.port, authority: this.node, tls, maxMessageBytes: MAX_MESSAGE_BYTES, ...(opts.guard ? { guard: opts.guard } : {}) });
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

  /** The etcd alarms raised in the cluster, as this control plane's member sees them. */
  async etcdAlarmList(opts?: CallOptions): Promise<EtcdMemberAlarm[]> {
    return toEtcdAlarms(await this.first('MachineService', 'EtcdAlarmList', {}, opts));
  }

  /** Disarms every raised etcd alarm (upstream asks etcd with an empty member: all of them); resolves with those it disarmed. */
  async etcdAlarmDisarm(opts?: CallOptions): Promise<EtcdMemberAlarm[]> {
    return toEtcdAlarms(await this.first('MachineService', 'EtcdAlarmDisarm', {}, opts));
  }

  /** Defragments this control plane's etcd member: it answers nothing else until done, so one member at a time. */
  async etcdDefragment(opts?: CallOptions): Promise<void> {
    await this.first('MachineService', 'EtcdDefragment', {}, opts);
  }

  /** Asks this control plane's etcd member to hand its leadership to a peer; resolves with the member name. */
  async etcdForfeitLeadership(opts?: CallOptions): Promise<{ member: string }> {
    return { member: str((await this.first('MachineService', 'EtcdForfeitLeadership', {}, opts))['member']) };
  }

  /** MachineService/EtcdSnapshot: streams the local etcd member's snapshot (a bbolt db file) chunk by chunk. */
  /**
   * MachineService/EtcdSnapshot: streams the local etcd member's snapshot (a bbolt db file) chunk
   * by chunk. A promise from `onChunk` holds the stream (the node waits) until it settles.
   */
  async etcdSnapshot(onChunk: (chunk: Buffer) => void | Promise<void>, opts?: CallOptions): Promise<void> {
    await this.stream('MachineService', 'EtcdSnapshot', {}, opts, (msg) => {
      const b = msg['bytes'];
      if (b && (b as Buffer).length) return onChunk(Buffer.from(b as Buffer));
    });
  }

  /**
   * MachineService/EtcdRecover (client stream): uploads a snapshot for a later Bootstrap with
   * recoverEtcd. Pieces from an async iterable are read as the node takes them, so a snapshot
   * need not be held whole; a throw from it ends the upload with that error.
   */
  async etcdRecover(data: Uint8Array | AsyncIterable<Uint8Array>, opts?: CallOptions & { chunkBytes?: number }): Promise<void> {
    const size = opts?.chunkBytes ?? 1024 * 1024;
    async function* chunks(): AsyncGenerator<Raw> {
      const pieces = data instanceof Uint8Array ? [data] : data;
      for await (const piece of pieces) {
        for (let i = 0; i < piece.byteLength; i += size) yield { bytes: Buffer.from(piece.subarray(i, i + size)) };
      }
    }
    const res = await this.call('MachineService', 'EtcdRecover', chunks(), opts?.deadlineMs ?? DEFAULT_STREAM_DEADLINE_MS, opts?.signal);
    const md = obj(list(res['messages'])[0]?.['metadata']);
    if (md && str(md['error']) !== '') throw this.error('MachineService/EtcdRecover', 'node-error', 'OK', sanitizeDetail(str(md['error'])));
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
    await this.stream('ImageService', 'Pull', { containerd, image_ref: input.image }, opts, (msg) => {
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
    await this.stream('LifecycleService', 'Upgrade', { containerd: SYSTEM_CONTAINERD, source: { image_name: input.image } }, opts, (msg) => {
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

  /**
   * cosi.resource.State/List: every resource of `type` in `namespace` on this node, in the order
   * the node sends them (Talos: by id), as `talosctl get` reads them. COSI replies are not wrapped
   * per node like MachineService's, so a refusal (unknown type: permission-denied) is the call's
   * status. The default deadline is the unary one: a list is a short read, not a transfer.
   */
  async listResources(input: { namespace: string; type: string }, opts?: CallOptions): Promise<CosiResource[]> {
    const resources: CosiResource[] = [];
    const request: Raw = { namespace: input.namespace, type: input.type };
    await this.invoke('cosi.resource.State', 'List', [request], opts?.deadlineMs ?? DEFAULT_UNARY_DEADLINE_MS, opts?.signal, (msg) => {
      const r = toCosiResource(msg['resource']);
      if (!r) throw new CallFailure('protocol', GrpcStatus.INTERNAL, 'list reply carried no resource metadata');
      resources.push(r);
    });
    return resources;
  }

  async reboot(opts?: CallOptions & { mode?: 'default' | 'powercycle' }): Promise<{ actorId: string }> {
    const m = await this.first('MachineService', 'Reboot', { mode: opts?.mode === 'powercycle' ? 'POWERCYCLE' : 'DEFAULT' }, opts);
    return { actorId: str(m['actor_id']) };
  }

  /**
   * Dials the node (if the channel is idle) and resolves once the channel is ready (`reused` when
   * it was up before this call), or once the attempt failed outright, with that failure as this
   * node's `connect` error (refused, TLS...): a caller that skips the node then dials it no more.
   * Calls made right after a failure also fail at once with it, for a moment only (a later call
   * dials again). Rejects with a `deadline` error when no connection is up within the deadline,
   * e.g. a node that accepts TCP but never completes the handshake, and with `canceled` on the
   * signal. Lets a caller wait for many nodes' connections at once and spend its call concurrency
   * only on nodes that answer.
   */
  async connect(opts?: CallOptions): Promise<TalosConnection> {
    let connection: Connection;
    try {
      connection = await this.channel.connect(opts?.deadlineMs ?? DEFAULT_UNARY_DEADLINE_MS, opts?.signal);
    } catch (err) {
      throw this.failed('connect', err);
    }
    return connection.failure ? { failure: this.callError('connect', connection.failure) } : { reused: connection.reused };
  }

  close(): void {
    this.channel.close();
  }

  private error(method: string, code: TalosApiErrorCode, grpcStatus: string, detail: string): TalosApiError {
    return new TalosApiError({ node: this.node, method, code, grpcStatus, detail });
  }

  /** A classified failure becomes this node's TalosApiError; anything else (a callback's throw) passes as it is. */
  private failed(method: string, err: unknown): unknown {
    return err instanceof CallFailure ? this.callError(method, err) : err;
  }

  private callError(method: string, err: CallFailure): TalosApiError {
    const status = grpcStatusName(err.status);
    return this.error(method, err.code, status, sanitizeDetail(err.detail) || status);
  }

  /** Unwraps `messages[0]`; a per-node `metadata.error` becomes an error for this node. */
  private async first(service: Service, method: string, request: Raw, opts?: CallOptions): Promise<Raw> {
    const label = `${service}/${method}`;
    const res = await this.call(service, method, [request], opts?.deadlineMs ?? DEFAULT_UNARY_DEADLINE_MS, opts?.signal);
    const m = list(res['messages'])[0];
    if (!m) throw this.error(label, 'protocol', 'OK', 'reply carried no messages');
    const md = obj(m['metadata']);
    if (md && str(md['error']) !== '') {
      const st = obj(md['status']);
      throw this.error(label, 'node-error', st ? grpcStatusName(num(st['code'])) : 'OK', sanitizeDetail(str(md['error'])));
    }
    return m;
  }

  /** A call with one reply: unary, or client-streaming with `requests` sent in order. */
  private async call(service: Service, method: string, requests: Raw[] | AsyncIterable<Raw>, deadlineMs: number, signal: AbortSignal | undefined): Promise<Raw> {
    const replies: Raw[] = [];
    await this.invoke(service, method, requests, deadlineMs, signal, (m) => void replies.push(m));
    if (replies.length !== 1) throw this.error(`${service}/${method}`, 'protocol', 'OK', `expected one reply message, got ${replies.length}`);
    return replies[0]!;
  }

  private stream(service: Service, method: string, request: Raw, opts: CallOptions | undefined, onMessage: (m: Raw) => void | Promise<void>): Promise<void> {
    return this.invoke(service, method, [request], opts?.deadlineMs ?? DEFAULT_STREAM_DEADLINE_MS, opts?.signal, onMessage);
  }

  private async invoke(service: Service, method: string, requests: Raw[] | AsyncIterable<Raw>, deadlineMs: number, signal: AbortSignal | undefined, onMessage: (m: Raw) => void | Promise<void>): Promise<void> {
    const label = `${service}/${method}`;
    const def = loadTalosServices()[SERVICE_KEY[service]][method];
    if (!def) throw this.error(label, 'unimplemented', 'UNIMPLEMENTED', 'method not in the client protos');
    const encode = (r: Raw): Uint8Array => {
      try {
        return def.requestSerialize(r);
      } catch (err) {
        throw this.error(label, 'internal', 'INTERNAL', `request did not encode: ${err instanceof Error ? err.message : String(err)}`);
      }
    };
    let messages: Uint8Array[] | AsyncIterable<Uint8Array>;
    if (Array.isArray(requests)) messages = requests.map(encode);
    else {
      const source = requests;
      messages = (async function* () {
        for await (const r of source) yield encode(r);
      })();
    }
    try {
      await this.channel.invoke({
        path: def.path,
        messages,
        deadlineMs,
        ...(signal ? { signal } : {}),
        onMessage: (bytes) => {
          let decoded: Raw;
          try {
            decoded = def.responseDeserialize(bytes) as Raw;
          } catch (err) {
            throw new CallFailure('protocol', GrpcStatus.INTERNAL, `reply did not decode: ${err instanceof Error ? err.message : String(err)}`);
          }
          return onMessage(decoded);
        },
      });
    } catch (err) {
      throw this.failed(label, err);
    }
  }
}

/** One TLS context for an mTLS identity, to share between the clients of a pass. */
export function createTalosSecureContext(ca: Pem, cert: Pem, key: Pem): SecureContext {
  const trusted = pemBuffer(ca);
  return createSecureContext({ ca: trusted, cert: presentedChain(pemBuffer(cert), trusted), key: keyBuffer(key), minVersion: 'TLSv1.2' });
}

export function createTalosClient(opts: TalosClientOptions): TalosApiClient {
  return new TalosApiClient(opts);
}
