import * as tls from 'node:tls';
import { DIAL_NOT_ALLOWED, type DialGuard } from '../../dial-guard.ts';
import { isIpLiteral } from './address.ts';
import { CallFailure } from './call-failure.ts';
import { certificateMatchesPin, type CertificatePin } from './fingerprint.ts';
import { GrpcStatus } from './grpc-status.ts';

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

let maintenanceContext: tls.SecureContext | undefined;

/**
 * Maintenance connections carry no credentials, so they can all share one context; otherwise each
 * would build its own (a cluster push opens one per node at once).
 *
 * No ecdhCurve here or in the mTLS contexts: OpenSSL 3.5's default offers the hybrid
 * X25519MLKEM768 first, as Go's TLS (1.24 and later) on a Talos node does. A push carries the
 * cluster's CA keys, so a recorded session must stay closed to a later quantum computer; X25519
 * alone would save about 0.3 ms of CPU per handshake, a few percent of a 50-node cluster push.
 * Naming the groups would drop the second key share the default sends (X25519, which a node
 * picking the hybrid never uses: one key generation fewer per dial), but an OpenSSL without
 * ML-KEM (before 3.5, which some distributions link Node against) refuses such a list outright,
 * where its default still connects with X25519.
 */
function sharedMaintenanceContext(): tls.SecureContext {
  maintenanceContext ??= tls.createSecureContext({ minVersion: 'TLSv1.2' });
  return maintenanceContext;
}

export const CLOSED_AFTER_HANDSHAKE = 'the node closed the connection right after the TLS handshake (client certificate rejected?)';
const FINGERPRINT_MISMATCH = 'server certificate does not match the pinned fingerprint';

/** Socket errors that mean nothing answers at the address, as opposed to a connection that broke. */
const NOT_REACHED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EADDRNOTAVAIL', 'EHOSTDOWN']);

/** OpenSSL alerts and certificate verification failures, as opposed to plain socket errors. */
function isTlsError(err: NodeJS.ErrnoException): boolean {
  const code = err.code ?? '';
  return code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_') || /CERT|SELF_SIGNED|UNABLE_TO|ISSUER/.test(code);
}

/** What a socket error before the first reply means for the caller. */
export function dialFailure(err: NodeJS.ErrnoException): CallFailure {
  if (err.code === DIAL_NOT_ALLOWED) return new CallFailure('not-allowed', GrpcStatus.PERMISSION_DENIED, err.message);
  // OpenSSL's reason ("tlsv13 alert certificate required") without its source file and line.
  if (isTlsError(err)) return new CallFailure('tls', GrpcStatus.UNAVAILABLE, (err as { reason?: string }).reason ?? err.message);
  if (NOT_REACHED.has(err.code ?? '')) return new CallFailure('unreachable', GrpcStatus.UNAVAILABLE, err.message);
  return new CallFailure('connection-lost', GrpcStatus.UNAVAILABLE, err.message);
}

function connectOptions(o: TalosTlsOptions, port: number, guard: DialGuard | undefined): tls.ConnectionOptions {
  const base: tls.ConnectionOptions = { host: o.host, port, ALPNProtocols: ['h2'], minVersion: 'TLSv1.2', ...(guard ? { lookup: guard.lookup } : {}) };
  if (o.kind === 'maintenance') {
    // The maintenance certificate is self-signed and ephemeral; trust comes from the pin, if any.
    return { ...base, secureContext: sharedMaintenanceContext(), rejectUnauthorized: false, ...(isIpLiteral(o.host) ? {} : { servername: o.host }) };
  }
  const verifyName = o.serverName ?? o.host;
  return {
    ...base,
    ...(o.secureContext ? { secureContext: o.secureContext } : { ca: o.ca, cert: o.cert, key: o.key }),
    rejectUnauthorized: true,
    // IP literals stay out of SNI (RFC 6066) but are still checked against the IP SANs.
    ...(isIpLiteral(verifyName) ? {} : { servername: verifyName }),
    checkServerIdentity: (_host, cert) => tls.checkServerIdentity(verifyName, cert),
  };
}

export interface TlsDial {
  /** The socket once the handshake (and the pin, in maintenance mode) passed. */
  socket: Promise<tls.TLSSocket>;
  /** Ends the attempt; `socket` rejects with `reason`. */
  cancel(reason: CallFailure): void;
}

/**
 * TCP connect and TLS handshake to a node. Pinning is checked here, before the HTTP/2 preface,
 * so a node that does not match the pin never sees a request. With a `guard`, an address outside
 * its networks is never dialled.
 */
export function dialTls(opts: TalosTlsOptions, port: number, guard?: DialGuard): TlsDial {
  const refused = guard?.refusal(opts.host);
  if (refused) return { socket: Promise.reject(dialFailure(refused)), cancel: () => {} };
  const socket = tls.connect(connectOptions(opts, port, guard));
  // A call is a HEADERS frame then a small DATA frame: with Nagle's algorithm the second waits for
  // the node's delayed ACK, tens of milliseconds per call.
  socket.setNoDelay(true);
  let cancel: (reason: CallFailure) => void = () => {};
  const promise = new Promise<tls.TLSSocket>((resolve, reject) => {
    let settled = false;
    const fail = (failure: CallFailure): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      reject(failure);
    };
    cancel = fail;
    // Stays after the handshake too: an error emitted before the session adds its own listener
    // must find one (fail() ignores it then).
    socket.once('error', (err: NodeJS.ErrnoException) => fail(dialFailure(err)));
    const onClose = (): void => fail(new CallFailure('connection-lost', GrpcStatus.UNAVAILABLE, 'the node closed the connection during the TLS handshake'));
    socket.once('close', onClose);
    socket.once('secureConnect', () => {
      if (settled) return;
      if (opts.kind === 'maintenance' && opts.pin) {
        // On a client socket this takes the leaf out of OpenSSL's peer chain (nodejs/node#65579):
        // getPeerCertificate() on this socket returns an empty object from here on.
        const peer = socket.getPeerX509Certificate();
        if (!peer || !certificateMatchesPin(peer, opts.pin)) return fail(new CallFailure('fingerprint-mismatch', GrpcStatus.UNAVAILABLE, FINGERPRINT_MISMATCH));
      }
      settled = true;
      // From here the session owns the socket's end; a failure built for a handshake that
      // already passed would only be thrown away.
      socket.removeListener('close', onClose);
      resolve(socket);
    });
  });
  return { socket: promise, cancel: (reason) => cancel(reason) };
}

/** siderolabs/crypto labels Ed25519 PKCS#8 keys `ED25519 PRIVATE KEY`, which OpenSSL refuses. */
export function normalizePrivateKeyPem(pem: string): string {
  return pem.replace(/-----(BEGIN|END) ED25519 PRIVATE KEY-----/g, '-----$1 PRIVATE KEY-----');
}
