// gRPC's length-prefixed messages over HTTP/2 (PROTOCOL-HTTP2.md upstream): a 1-byte compressed
// flag, a 4-byte big-endian length, then the message. This client never advertises an encoding,
// so a conforming server never compresses a reply.

/** A reply the client cannot take: too large, compressed, or cut short. */
export class FrameError extends Error {
  override name = 'FrameError';
  constructor(
    message: string,
    readonly tooLarge = false,
  ) {
    super(message);
  }
}

const PREFIX_BYTES = 5;

export function encodeMessage(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(PREFIX_BYTES + message.byteLength);
  out[0] = 0;
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, PREFIX_BYTES);
  return out;
}

/** Splits a reply's DATA frames back into messages, however HTTP/2 chunked them. */
export class MessageReader {
  private chunks: Buffer[] = [];
  private buffered = 0;

  constructor(private readonly maxBytes: number) {}

  /** True while part of a message is still expected: a reply that ends here was cut short. */
  get midMessage(): boolean {
    return this.buffered > 0;
  }

  /** The messages completed by `chunk`, in order. */
  push(chunk: Buffer): Buffer[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const out: Buffer[] = [];
    while (this.buffered >= PREFIX_BYTES) {
      const head = this.chunks[0]!.length >= PREFIX_BYTES ? this.chunks[0]! : this.flatten();
      if (head[0] !== 0) throw new FrameError('the node sent a compressed message, which this client never asked for');
      const length = head.readUInt32BE(1);
      if (length > this.maxBytes) throw new FrameError(`reply message of ${length} bytes exceeds the ${this.maxBytes}-byte limit`, true);
      if (this.buffered < PREFIX_BYTES + length) break;
      const all = this.flatten();
      out.push(all.subarray(PREFIX_BYTES, PREFIX_BYTES + length));
      const rest = all.subarray(PREFIX_BYTES + length);
      this.chunks = rest.length > 0 ? [rest] : [];
      this.buffered = rest.length;
    }
    return out;
  }

  private flatten(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks, this.buffered)];
    return this.chunks[0]!;
  }
}

/** The grpc-timeout header: at most eight digits and a unit, so long deadlines go in seconds. */
export function grpcTimeout(ms: number): string {
  const whole = Math.max(1, Math.ceil(ms));
  return whole < 100_000_000 ? `${whole}m` : `${Math.ceil(whole / 1000)}S`;
}

/** grpc-message is percent-encoded UTF-8; a malformed one is shown as it came. */
export function decodeGrpcMessage(raw: string | string[] | undefined): string {
  const text = Array.isArray(raw) ? raw.join(', ') : (raw ?? '');
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
