// What a whole etcd snapshot looks like. etcd's Maintenance/Snapshot (which Talos's EtcdSnapshot
// streams) sends the database file, whose size is a multiple of 512 bytes, followed by the SHA-256
// of those bytes; `talosctl etcd snapshot` checks the size's shape and etcd's restore checks the
// digest. A stream that ended early, or bytes that changed on the way, fail one or the other.
import { createHash, type Hash } from 'node:crypto';

const DIGEST_BYTES = 32;

/**
 * Checks a snapshot as it streams, without holding it: a running SHA-256 of the database bytes
 * (everything but the last 32 bytes seen so far, kept back as the candidate trailing digest) and
 * one of the whole file, the digest stored with the snapshot.
 */
export class EtcdSnapshotCheck {
  private readonly db: Hash = createHash('sha256');
  private readonly file: Hash = createHash('sha256');
  private tail: Buffer = Buffer.alloc(0);
  size = 0;

  update(chunk: Uint8Array): void {
    if (!chunk.byteLength) return;
    this.size += chunk.byteLength;
    this.file.update(chunk);
    if (chunk.byteLength >= DIGEST_BYTES) {
      this.db.update(this.tail);
      this.db.update(chunk.subarray(0, chunk.byteLength - DIGEST_BYTES));
      this.tail = Buffer.from(chunk.subarray(chunk.byteLength - DIGEST_BYTES));
      return;
    }
    const joined = Buffer.concat([this.tail, chunk]);
    const spill = Math.max(0, joined.length - DIGEST_BYTES);
    if (spill) this.db.update(joined.subarray(0, spill));
    this.tail = joined.subarray(spill);
  }

  /** Why what was streamed is not a whole etcd snapshot (undefined: it is one). Call once, at the end. */
  problem(): string | undefined {
    if (this.size % 512 !== DIGEST_BYTES) return `it does not end with etcd's sha256 (${this.size} bytes: cut short?)`;
    if (!this.db.digest().equals(this.tail)) return `its trailing sha256 does not match its ${this.size - DIGEST_BYTES} bytes of database`;
    return undefined;
  }

  /** The SHA-256 (hex) of every byte streamed. Call once, at the end. */
  sha256(): string {
    return this.file.digest('hex');
  }
}

/** Why `data` is not a whole etcd snapshot (undefined: it is one). */
export function etcdSnapshotProblem(data: Buffer): string | undefined {
  const check = new EtcdSnapshotCheck();
  check.update(data);
  return check.problem();
}
