// One HTTP/2 connection to one node, carrying gRPC calls (PROTOCOL-HTTP2.md upstream). Talos's
// API is unary and server-streaming calls to a single address over TLS, so the channel is a
// session, a dial, a short memory of its failure, and the call's framing; no name resolution,
// balancing or retry policy to pay for per node.
import * as http2 from 'node:http2';
import type { TLSSocket } from 'node:tls';
import { whenAborted } from './abort-fanout.ts';
import { CallFailure } from './call-failure.ts';
import { codeForStatus } from './errors.ts';
import { decodeGrpcMessage, encodeMessage, FrameError, grpcTimeout, MessageReader } from './grpc-frames.ts';
import { GrpcStatus, statusForHttp } from './grpc-status.ts';
import type { DialGuard } from '../../dial-guard.ts';
import { CLOSED_AFTER_HANDSHAKE, dialFailure, dialTls, type TalosTlsOptions } from './tls-connector.ts';

/** A dial nobody waits for any more still ends here, as grpc's minimum connect timeout. */
const DIAL_TIMEOUT_MS = 20_000;
/**
 * After a failed dial, calls fail at once with its reason for this long: the calls a caller makes
 * right after connect() reported the failure do not dial again, while a caller polling a rebooting
 * node still gets a fresh attempt on each poll.
 */
const FAILURE_MEMO_MS = 100;
/** How long a connection suspected dead has to answer a PING. */
const PING_TIMEOUT_MS = 2_000;
/**
 * Flow-control windows: HTTP/2's default of 64 KiB per stream would hold an etcd snapshot download
 * to 64 KiB per round trip.
 */
const STREAM_WINDOW_BYTES = 1024 * 1024;
const SESSION_WINDOW_BYTES = 4 * 1024 * 1024;
const USER_AGENT = 'rezuscloud-talos-client/1';

export interface NodeChannelOptions {
  host: string;
  port: number;
  /** `host:port` as the :authority header carries it, IPv6 bracketed. */
  authority: string;
  tls: TalosTlsOptions;
  maxMessageBytes: number;
  /** Where the runner may dial (REZUS_NODE_NETWORKS); absent: anywhere. */
  guard?: DialGuard;
}

export interface Invocation {
  /** `/package.Service/Method`. */
  path: string;
  /**
   * Serialized request messages: one for unary and server-streaming calls. An async iterable (a
   * client stream too large to hold) is read one message at a time, as the node takes them; its
   * throw ends the call with that error.
   */
  messages: Uint8Array[] | AsyncIterable<Uint8Array>;
  deadlineMs: number;
  signal?: AbortSignal;
  /**
   * Each reply message as it arrives; a throw ends the call with that error. A promise pauses
   * the reply (HTTP/2 flow control stops the node) until it settles; its rejection ends the call.
   */
  onMessage: (message: Buffer) => unknown;
}

/**
 * What connect() came to: a connection, `reused` when it was up before connect() was called (so
 * it may be one the node no longer knows, after a reboot without a word), or the dial's failure.
 */
export type Connection = { reused: boolean; failure?: undefined } | { failure: CallFailure; reused?: undefined };

interface Live {
  session: http2.ClientHttp2Session;
  calls: number;
  /** A PING is out to learn whether the connection still carries anything. */
  probing?: boolean;
}

const canceled = (detail: string): CallFailure => new CallFailure('canceled', GrpcStatus.CANCELLED, detail);

export class NodeChannel {
  private live: Live | undefined;
  private dialing: Promise<Live> | undefined;
  private cancelDial: ((reason: CallFailure) => void) | undefined;
  private failure: { error: CallFailure; until: number } | undefined;
  private closed = false;

  constructor(private readonly opts: NodeChannelOptions) {}

  /**
   * Resolves once a connection is up, or once the attempt failed outright, with that failure (a
   * call made right after fails at once with it); rejects when the deadline or the signal ends the
   * wait first.
   */
  async connect(deadlineMs: number, signal?: AbortSignal): Promise<Connection> {
    const before = this.live;
    let outcome: Connection | undefined;
    await this.bounded(deadlineMs, signal, 'connecting', `no connection within the ${deadlineMs} ms deadline`, (settle) => {
      this.ready().then(
        (live) => {
          outcome = { reused: live === before };
          settle();
        },
        (err: unknown) => {
          if (!(err instanceof CallFailure) || err.code === 'canceled') return settle(err as Error);
          outcome = { failure: err };
          settle();
        },
      );
    });
    return outcome!;
  }

  /** Runs one call; resolves when the node ends it with status OK. */
  invoke(call: Invocation): Promise<void> {
    let stream: http2.ClientHttp2Stream | undefined;
    let on: Live | undefined;
    let over = false;
    const deadlineText = `no reply within the ${call.deadlineMs} ms deadline`;
    return this.bounded(call.deadlineMs, call.signal, 'during the call', deadlineText, (settle) => {
      this.ready().then(
        (live) => {
          if (over) return;
          on = live;
          stream = this.open(live, call, settle);
        },
        (err: unknown) => settle(err as Error),
      );
    }, (failure) => {
      over = true;
      // Tells the node to stop: RST_STREAM(CANCEL) ends its handler's context.
      if (stream && !stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
      if (on && failure.code === 'deadline') this.probe(on);
    });
  }

  /**
   * A call that ran out of time may have run on a connection that is gone without a word (a NAT
   * or firewall dropped it; the TCP stack would notice only after minutes). An unanswered PING
   * closes the connection, so the next call dials instead of waiting on it.
   */
  private probe(live: Live): void {
    const { session } = live;
    // Many calls of a pass can time out on one connection at once; one PING answers for all.
    if (live.probing || session.destroyed || session.closed) return;
    live.probing = true;
    const drop = (): void => {
      if (this.live === live) this.live = undefined;
      session.destroy();
    };
    const timer = setTimeout(drop, PING_TIMEOUT_MS);
    timer.unref();
    const answered = session.ping((err) => {
      clearTimeout(timer);
      live.probing = false;
      if (err) drop();
    });
    if (!answered) {
      clearTimeout(timer);
      live.probing = false;
    }
  }

  close(): void {
    this.closed = true;
    this.cancelDial?.(canceled('client closed'));
    this.live?.session.destroy();
    this.live = undefined;
  }

  /**
   * Runs `start` under the deadline and the signal. `settle` ends the call (an error rejects);
   * `stop` runs when the deadline or the signal ended it first.
   */
  private bounded(
    deadlineMs: number,
    signal: AbortSignal | undefined,
    phase: string,
    deadlineText: string,
    start: (settle: (err?: Error) => void) => void,
    stop?: (failure: CallFailure) => void,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(canceled('aborted before the call started'));
      let settled = false;
      const settle = (err?: Error): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        stopAbort();
        if (err) reject(err);
        else resolve();
      };
      const end = (failure: CallFailure): void => {
        if (settled) return;
        settle(failure);
        stop?.(failure);
      };
      const timer = setTimeout(() => end(new CallFailure('deadline', GrpcStatus.DEADLINE_EXCEEDED, deadlineText)), deadlineMs);
      const stopAbort = whenAborted(signal, () => end(canceled(`aborted ${phase}`)));
      start(settle);
    });
  }

  private ready(): Promise<Live> {
    if (this.closed) return Promise.reject(canceled('client closed'));
    const live = this.live;
    if (live && !live.session.closed && !live.session.destroyed) return Promise.resolve(live);
    if (this.failure && Date.now() < this.failure.until) return Promise.reject(this.failure.error);
    return (this.dialing ??= this.dial());
  }

  private dial(): Promise<Live> {
    const attempt = dialTls(this.opts.tls, this.opts.port, this.opts.guard);
    this.cancelDial = attempt.cancel;
    const timer = setTimeout(() => this.cancelDial?.(new CallFailure('deadline', GrpcStatus.DEADLINE_EXCEEDED, `no connection within ${DIAL_TIMEOUT_MS} ms`)), DIAL_TIMEOUT_MS);
    timer.unref();
    return attempt.socket
      .then((socket) => this.startSession(socket))
      .then(
        (live) => {
          this.failure = undefined;
          if (this.closed) {
            live.session.destroy();
            throw canceled('client closed');
          }
          this.live = live;
          return live;
        },
        (err: unknown) => {
          const error = err instanceof CallFailure ? err : dialFailure(err as NodeJS.ErrnoException);
          this.failure = { error, until: Date.now() + FAILURE_MEMO_MS };
          throw error;
        },
      )
      .finally(() => {
        clearTimeout(timer);
        this.dialing = undefined;
        this.cancelDial = undefined;
      });
  }

  /**
   * The session is ready once the node's SETTINGS arrive: with TLS 1.3 the node judges our client
   * certificate only after our side of the handshake is done, and a rejection (an alert, or a
   * silent hang-up) comes instead of its SETTINGS.
   */
  private startSession(socket: TLSSocket): Promise<Live> {
    return new Promise((resolve, reject) => {
      let sawTicket = false;
      socket.once('session', () => {
        sawTicket = true;
      });
      const session = http2.connect(`https://${this.opts.authority}`, {
        createConnection: () => socket,
        settings: { enablePush: false, initialWindowSize: STREAM_WINDOW_BYTES },
      });
      session.once('connect', () => session.setLocalWindowSize(SESSION_WINDOW_BYTES));
      const live: Live = { session, calls: 0 };
      let up = false;
      let lastError: NodeJS.ErrnoException | undefined;
      this.cancelDial = (reason) => {
        if (up) return;
        session.destroy();
        reject(reason);
      };
      session.on('error', (err: NodeJS.ErrnoException) => {
        lastError ??= err;
      });
      // A TLS alert after the handshake (a rejected client certificate) errors the socket, but the
      // session only half-closes it and never reports the end; destroying the socket ends both.
      socket.on('error', (err: NodeJS.ErrnoException) => {
        lastError ??= err;
        socket.destroy();
      });
      session.once('remoteSettings', () => {
        up = true;
        if (live.calls === 0) session.unref();
        resolve(live);
      });
      const forget = (): void => {
        if (this.live === live) this.live = undefined;
      };
      // A node going away (reboot, shutdown) takes no new calls on this connection; the next call dials.
      session.once('goaway', forget);
      session.once('close', () => {
        forget();
        if (up) return;
        if (lastError) return reject(dialFailure(lastError));
        const quiet = !sawTicket && socket.bytesRead === 0 && this.opts.tls.kind === 'configured';
        reject(quiet ? new CallFailure('tls', GrpcStatus.UNAVAILABLE, CLOSED_AFTER_HANDSHAKE) : new CallFailure('connection-lost', GrpcStatus.UNAVAILABLE, 'the node closed the connection before HTTP/2 was set up'));
      });
    });
  }

  private open(live: Live, call: Invocation, settle: (err?: Error) => void): http2.ClientHttp2Stream {
    const { session } = live;
    if (live.calls++ === 0) session.ref();
    const stream = session.request(
      {
        ':method': 'POST',
        ':path': call.path,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': grpcTimeout(call.deadlineMs),
        'user-agent': USER_AGENT,
      },
      { endStream: false },
    );
    const reader = new MessageReader(this.opts.maxMessageBytes);
    let httpStatus = 0;
    let grpcStatus: number | undefined;
    let grpcMessage = '';
    let failed: Error | undefined;
    const fail = (err: Error): void => {
      failed ??= err;
      if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
    };
    const takeStatus = (headers: http2.IncomingHttpHeaders): void => {
      const raw = headers['grpc-status'];
      if (raw === undefined) return;
      grpcStatus = Number(raw);
      grpcMessage = decodeGrpcMessage(headers['grpc-message']);
    };
    stream.on('response', (headers) => {
      httpStatus = Number(headers[':status']);
      // A reply with no messages may carry its status in these headers alone ("trailers-only").
      takeStatus(headers);
    });
    // Replies read but not yet handed over, while a handler's promise holds the stream paused.
    const backlog: Buffer[] = [];
    let busy: Promise<void> | undefined;
    const deliver = (): void => {
      while (!failed && backlog.length) {
        let r: unknown;
        try {
          r = call.onMessage(backlog.shift()!);
        } catch (err) {
          fail(err as Error);
          return;
        }
        if (r instanceof Promise) {
          stream.pause();
          busy = r.then(
            () => {
              busy = undefined;
              deliver();
              if (!busy && !failed) stream.resume();
            },
            (err: unknown) => {
              busy = undefined;
              fail(err as Error);
            },
          );
          return;
        }
      }
    };
    stream.on('data', (chunk: Buffer) => {
      if (failed) return;
      try {
        backlog.push(...reader.push(chunk));
      } catch (err) {
        fail(err instanceof FrameError ? new CallFailure(err.tooLarge ? 'resource-exhausted' : 'protocol', err.tooLarge ? GrpcStatus.RESOURCE_EXHAUSTED : GrpcStatus.INTERNAL, err.message) : (err as Error));
        return;
      }
      if (!busy) deliver();
    });
    stream.on('trailers', takeStatus);

    // Every outcome is read in 'close'; the error itself adds nothing the close does not show.
    stream.on('error', () => {});
    stream.once('close', () => {
      if (--live.calls === 0 && !session.destroyed) session.unref();
      // Node ends the stream's readable side also when the connection is cut, so only a stream
      // that closed cleanly on a live connection really ended without a status.
      const ended = stream.rstCode === http2.constants.NGHTTP2_NO_ERROR && !session.destroyed && !session.closed;
      const outcome = this.outcome(stream, { httpStatus, grpcStatus, grpcMessage, ended, cutShort: reader.midMessage });
      // The last replies' handler may still be at work: the call is over when it is.
      const done = (): void => {
        if (busy) void busy.then(done);
        else settle(failed ?? outcome);
      };
      done();
    });
    if (Array.isArray(call.messages)) {
      for (const m of call.messages) stream.write(encodeMessage(m));
      stream.end();
    } else {
      void this.upload(stream, call.messages).then(
        () => {
          if (!stream.closed && !stream.destroyed) stream.end();
        },
        (err: unknown) => fail(err as Error),
      );
    }
    return stream;
  }

  /** Writes a client stream one message at a time, waiting for the node to take each (backpressure). */
  private async upload(stream: http2.ClientHttp2Stream, messages: AsyncIterable<Uint8Array>): Promise<void> {
    for await (const m of messages) {
      if (stream.closed || stream.destroyed) return;
      if (!stream.write(encodeMessage(m))) {
        await new Promise<void>((resolve) => {
          const go = (): void => {
            stream.off('drain', go);
            stream.off('close', go);
            resolve();
          };
          stream.on('drain', go);
          stream.on('close', go);
        });
      }
    }
  }

  private outcome(
    stream: http2.ClientHttp2Stream,
    { httpStatus, grpcStatus, grpcMessage, ended, cutShort }: { httpStatus: number; grpcStatus: number | undefined; grpcMessage: string; ended: boolean; cutShort: boolean },
  ): CallFailure | undefined {
    if (grpcStatus === GrpcStatus.OK) {
      return cutShort ? new CallFailure('protocol', GrpcStatus.INTERNAL, 'the reply ended inside a message') : undefined;
    }
    if (grpcStatus !== undefined) return new CallFailure(codeForStatus(grpcStatus), grpcStatus, grpcMessage);
    if (this.closed) return canceled('client closed');
    if (httpStatus !== 0 && httpStatus !== 200) {
      const status = statusForHttp(httpStatus);
      return new CallFailure(codeForStatus(status), status, `the node answered HTTP ${httpStatus} without a gRPC status`);
    }
    if (ended) return new CallFailure('protocol', GrpcStatus.INTERNAL, 'the reply ended without a gRPC status');
    if (stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM) {
      return new CallFailure('connection-lost', GrpcStatus.UNAVAILABLE, 'the node refused the call (going away)');
    }
    return new CallFailure('connection-lost', GrpcStatus.UNAVAILABLE, 'the connection closed before the reply ended');
  }
}
