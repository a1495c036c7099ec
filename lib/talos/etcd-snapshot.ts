// What a whole etcd snapshot looks like. etcd's Maintenance/Snapshot (which Talos's EtcdSnapshot
// streams) sends the database file, whose size is a multiple of 512 bytes, followed by the SHA-256
// of those bytes; `talosctl etcd snapshot` checks the size's shape and etcd's restore checks the
// digest. A stream that ended early, or bytes that changed on the way, fail one or the other.
import { createHash } from 'node:crypto';

const DIGEST_BYTES = 32;

/** Why `data` is not a whole etcd snapshot (undefined: it is one). */
export function etcdSnapshotProblem(data: Buffer): string | undefined {
  if (data.length % 512 !== DIGEST_BYTES) return `it does not end with etcd's sha256 (${data.length} bytes: cut short?)`;
  const db = data.subarray(0, data.length - DIGEST_BYTES);
  const expected = data.subarray(data.length - DIGEST_BYTES);
  if (!createHash('sha256').update(db).digest().equals(expected)) return `its trailing sha256 does not match its ${db.length} bytes of database`;
  return undefined;
}
