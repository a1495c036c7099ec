// Reading a stored etcd snapshot back, one sealed chunk at a time: the download streams it and the
// restore uploads it without ever holding it whole. Portable: the edge imports it too.
import { and, eq } from 'drizzle-orm';
import { etcdSnapshotChunks, type etcdSnapshots } from '../../db/schema/index.ts';
import type { Deps } from '../context.ts';
import { snapshotSealContext } from './job.ts';

/** The plaintext size of one stored chunk (the last one may be shorter). */
export const SNAPSHOT_CHUNK_BYTES = 1024 * 1024;

/** A chunk is bound to its cluster, snapshot and position: moved, swapped or reordered, it does not open. */
export const snapshotChunkSealContext = (clusterId: string, id: string, seq: number): string => `${snapshotSealContext(clusterId, id)}:${seq}`;

export type StoredSnapshot = Pick<typeof etcdSnapshots.$inferSelect, 'id' | 'clusterId' | 'sizeBytes' | 'sealed' | 'chunks'>;

/** A stored snapshot that cannot be read back as it was taken. */
export class SnapshotUnreadable extends Error {
  override name = 'SnapshotUnreadable';
}

/** The master key's refusal (wrong key, changed bytes, wrong context), not the edge's "runs at home". */
const isSealError = (err: unknown): boolean => err instanceof Error && err.name === 'SealError';

function open(deps: Pick<Deps, 'sealer'>, sealed: string, context: string, what: string): Uint8Array {
  try {
    return deps.sealer.open(sealed, context);
  } catch (err) {
    if (isSealError(err)) throw new SnapshotUnreadable(`${what} does not open: it was changed in the database or does not belong there`);
    throw err;
  }
}

/**
 * The snapshot's bytes in order, one chunk opened at a time (an older row: its one sealed value).
 * Throws SnapshotUnreadable on a chunk that is missing or does not open, or when the chunks do
 * not add up to the stored size, so bad bytes are never passed on as the snapshot.
 */
export async function* snapshotPieces(deps: Pick<Deps, 'db' | 'sealer'>, snap: StoredSnapshot): AsyncGenerator<Uint8Array> {
  let size = 0;
  if (snap.chunks === null) {
    if (snap.sealed === null) throw new SnapshotUnreadable(`snapshot ${snap.id} has no stored data`);
    const data = open(deps, snap.sealed, snapshotSealContext(snap.clusterId, snap.id), `snapshot ${snap.id}`);
    size = data.byteLength;
    if (size === snap.sizeBytes) yield data;
  } else {
    for (let seq = 0; seq < snap.chunks; seq++) {
      const what = `snapshot ${snap.id}: chunk ${seq + 1} of ${snap.chunks}`;
      const row = await deps.db
        .select({ sealed: etcdSnapshotChunks.sealed })
        .from(etcdSnapshotChunks)
        .where(and(eq(etcdSnapshotChunks.snapshotId, snap.id), eq(etcdSnapshotChunks.seq, seq)))
        .get();
      if (!row) throw new SnapshotUnreadable(`${what} is missing`);
      const piece = open(deps, row.sealed, snapshotChunkSealContext(snap.clusterId, snap.id, seq), what);
      size += piece.byteLength;
      if (size > snap.sizeBytes) break;
      yield piece;
    }
  }
  if (size !== snap.sizeBytes) throw new SnapshotUnreadable(`snapshot ${snap.id}: stored data is not the ${snap.sizeBytes} bytes recorded for it`);
}

/** Reads every chunk once without keeping any: throws what snapshotPieces would, before a byte is served. */
export async function verifySnapshot(deps: Pick<Deps, 'db' | 'sealer'>, snap: StoredSnapshot): Promise<void> {
  for await (const piece of snapshotPieces(deps, snap)) void piece;
}

/** The snapshot as a Web stream, one chunk read per pull. */
export function snapshotStream(deps: Pick<Deps, 'db' | 'sealer'>, snap: StoredSnapshot): ReadableStream<Uint8Array> {
  const pieces = snapshotPieces(deps, snap);
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await pieces.next();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    async cancel() {
      await pieces.return(undefined);
    },
  });
}
