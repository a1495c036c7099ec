import type { Socket } from 'node:net';
import * as tls from 'node:tls';
import { CallCredentials, ChannelCredentials } from '@grpc/grpc-js';
import { isIpLiteral } from './address.ts';
import { certificateMatchesPin, type CertificatePin } from './fingerprint.ts';

export type TalosTlsOptions =
  | { kind: 'maintenance'; host: string; pin?: CertificatePin }
  | {
      kind: 'configured';
      host: string;
      serverName?: string;
      ca: Buffer;
      cert: Buffer;
      key: Buffer;
      /** Built from ca/cert/key by the caller and shared by many clients: building one parses every key and cert. */
      secureContext?: tls.SecureContext;
    };

export interface TransportFailure {
  kind: 'tls' | 'fingerprint-mismatch';
  message: string;
  /** The node closed the connection without an error grpc-js could report. */
  quiet?: boolean;
}

type SecureConnector = ReturnType<ChannelCredentials['_createSecureConnector']>;

let maintenanceContext: tls.SecureContext | undefined;

/**
 * Maintenance connections carry no credentials, so they can all share one context; otherwise each
 * would build its own (a cluster push opens one per node at once).
 */
function sharedMaintenanceContext(): tls.SecureContext {
  maintenanceContext ??= tls.createSecureContext({ minVersion: 'TLSv1.2' });
  return maintenanceContext;
}

const CLOSED_AFTER_HANDSHAKE = 'the node closed the connection right after the TLS handshake (client certificate rejected?)';
const FINGERPRINT_MISMATCH = 'server certificate does not match the pinned fingerprint';

/** OpenSSL alerts and certificate verification failures, as opposed to plain socket errors. */
function isTlsError(err: NodeJS.ErrnoException): boolean {
  const code = err.code ?? '';
  return code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_') || /CERT|SELF_SIGNED|UNABLE_TO|ISSUER/.test(code);
}

/**
 * Performs the TLS handshake for grpc-js ourselves. grpc-js skips `checkServerIdentity` when
 * `rejectUnauthorized` is false, so maintenance-mode pinning needs its own hook; doing it here
 * means a mismatching node is dropped before the HTTP/2 preface, i.e. before any request.
 * It also keeps IP literals out of SNI (RFC 6066) while still checking IP SANs.
 */
export class TalosChannelCredentials extends ChannelCredentials {
  private readonly sockets = new Set<tls.TLSSocket>();
  lastFailure: TransportFailure | undefined;

  constructor(private readonly opts: TalosTlsOptions) {
    super();
  }

  override _isSecure(): boolean {
    return true;
  }

  override _equals(other: ChannelCredentials): boolean {
    return other === this;
  }

  override _createSecureConnector(_target: unknown, _options: unknown, callCredentials?: CallCredentials): SecureConnector {
    const creds = callCredentials ?? CallCredentials.createEmpty();
    return {
      connect: (socket: Socket) => this.handshake(socket),
      waitForReady: () => Promise.resolve(),
      getCallCredentials: () => creds,
      destroy: () => {},
    };
  }

  /** Ends handshakes still in flight (e.g. against a node that accepts TCP but never answers). */
  destroyAll(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  private record(failure: TransportFailure): void {
    this.lastFailure = failure;
  }

  private connectOptions(socket: Socket): tls.ConnectionOptions {
    const o = this.opts;
    const base: tls.ConnectionOptions = { socket, ALPNProtocols: ['h2'], minVersion: 'TLSv1.2' };
    if (o.kind === 'maintenance') {
      // The maintenance certificate is self-signed and ephemeral; trust comes from the pin, if any.
      return { ...base, secureContext: sharedMaintenanceContext(), rejectUnauthorized: false, ...(isIpLiteral(o.host) ? {} : { servername: o.host }) };
    }
    const verifyName = o.serverName ?? o.host;
    return {
      ...base,
      ...(o.secureContext ? { secureContext: o.secureContext } : { ca: o.ca, cert: o.cert, key: o.key }),
      rejectUnauthorized: true,
      ...(isIpLiteral(verifyName) ? {} : { servername: verifyName }),
      checkServerIdentity: (_host, cert) => tls.checkServerIdentity(verifyName, cert),
    };
  }

  private handshake(socket: Socket): Promise<{ socket: Socket; secure: boolean }> {
    return new Promise((resolve, reject) => {
      const tlsSocket = tls.connect(this.connectOptions(socket));
      this.sockets.add(tlsSocket);
      tlsSocket.once('close', () => this.sockets.delete(tlsSocket));
      let settled = false;
      const fail = (err: Error): void => {
        if (settled) return;
        settled = true;
        tlsSocket.destroy();
        reject(err);
      };
      tlsSocket.once('error', (err: NodeJS.ErrnoException) => {
        if (isTlsError(err)) this.record({ kind: 'tls', message: err.message });
        fail(err);
      });
      tlsSocket.once('secureConnect', () => {
        if (this.opts.kind === 'maintenance' && this.opts.pin) {
          const peer = tlsSocket.getPeerCertificate();
          if (!peer?.raw || !certificateMatchesPin(peer.raw, this.opts.pin)) {
            this.record({ kind: 'fingerprint-mismatch', message: FINGERPRINT_MISMATCH });
            fail(new Error(FINGERPRINT_MISMATCH));
            return;
          }
        }
        settled = true;
        // With TLS 1.3 the server judges our client certificate after our handshake is done;
        // its rejection arrives as an alert on the open socket.
        tlsSocket.on('error', (err: NodeJS.ErrnoException) => {
          if (isTlsError(err)) this.record({ kind: 'tls', message: err.message });
        });
        if (this.opts.kind === 'configured') {
          // A node that rejects our certificate after a TLS 1.3 handshake may just hang up
          // (no alert): nothing at all, not even a session ticket, arrives before the close.
          let sawSession = false;
          tlsSocket.once('session', () => {
            sawSession = true;
          });
          tlsSocket.once('close', () => {
            if (!sawSession && tlsSocket.bytesRead === 0) this.record({ kind: 'tls', message: CLOSED_AFTER_HANDSHAKE, quiet: true });
          });
        }
        resolve({ socket: tlsSocket, secure: true });
      });
    });
  }
}

/** siderolabs/crypto labels Ed25519 PKCS#8 keys `ED25519 PRIVATE KEY`, which OpenSSL refuses. */
export function normalizePrivateKeyPem(pem: string): string {
  return pem.replace(/-----(BEGIN|END) ED25519 PRIVATE KEY-----/g, '-----$1 PRIVATE KEY-----');
}
