import { and, desc, eq, isNull, sql } from 'drizzle-orm';
import { createHash } from 'node:crypto';
import { stateLocks, stateVersions } from '../../db/schema/index.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Deps } from '../context.ts';

type StoreDeps = Pick<Deps, 'db' | 'clock' | 'sealer'>;
export type StateVersionRow = typeof stateVersions.$inferSelect;

export const stateContext = (clusterId: string, version: number) => `state:${clusterId}:${version}`;
export const md5Base64 = (body: Uint8Array) => createHash('md5').update(body).digest('base64');

/** Why a write was refused; the route turns each into its HTTP answer. */
export class StateWriteRefused extends Error {
  constructor(
    readonly reason: 'locked' | 'not_locked' | 'lineage' | 'stale_serial' | 'serial_conflict',
    message: string,
    readonly holder?: { lockId: string; info: string },
  ) {
    super(message);
  }
}

export interface ParsedState {
  serial: number;
  lineage: string;
}

/** The two fields the backend needs from a tofu state document; anything else is tofu's business. */
export function parseStateDocument(body: Uint8Array): ParsedState | null {
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch {
    return null;
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return null;
  const { serial, lineage } = doc as Record<string, unknown>;
  if (typeof lineage !== 'string' || lineage.length === 0 || lineage.length > 200) return null;
  if (typeof serial !== 'number' || !Number.isSafeInteger(serial) || serial < 0) return null;
  return { serial, lineage };
}

export async function currentVersion(deps: Pick<Deps, 'db'>, clusterId: string): Promise<StateVersionRow | undefined> {
  return deps.db
    .select()
    .from(stateVersions)
    .where(and(eq(stateVersions.clusterId, clusterId), isNull(stateVersions.deletedAt)))
    .orderBy(desc(stateVersions.version))
    .limit(1)
    .get();
}

export async function findVersion(deps: Pick<Deps, 'db'>, clusterId: string, version: number): Promise<StateVersionRow | undefined> {
  return deps.db
    .select()
    .from(stateVersions)
    .where(and(eq(stateVersions.clusterId, clusterId), eq(stateVersions.version, version)))
    .get();
}

export function openVersion(deps: Pick<Deps, 'sealer'>, row: StateVersionRow): Buffer {
  return deps.sealer.open(row.bodySealed, stateContext(row.clusterId, row.version));
}

export async function listVersions(deps: Pick<Deps, 'db'>, clusterId: string) {
  return deps.db
    .select({
      version: stateVersions.version,
      serial: stateVersions.serial,
      lineage: stateVersions.lineage,
      size: stateVersions.size,
      md5: stateVersions.md5,
      writtenBy: stateVersions.writtenBy,
      createdAt: stateVersions.createdAt,
      deletedAt: stateVersions.deletedAt,
    })
    .from(stateVersions)
    .where(eq(stateVersions.clusterId, clusterId))
    .orderBy(desc(stateVersions.version));
}

export async function lockHolder(deps: Pick<Deps, 'db'>, clusterId: string) {
  return deps.db.select().from(stateLocks).where(eq(stateLocks.clusterId, clusterId)).get();
}

/**
 * SQL that is true when `writer` (a run, or null for a credential of no run) presenting `lockId`
 * (or none) may write: the lock it names is the one held, and held by that writer, or no lock is
 * held and it names none. A lock's ID is no secret (every refused locker's 423 carries it), so it
 * does not let another credential write. Evaluated inside the write statement so a LOCK arriving
 * between check and write cannot be overtaken.
 */
function lockAllows(clusterId: string, lockId: string | undefined, writer: string | null) {
  return lockId === undefined
    ? sql`NOT EXISTS (SELECT 1 FROM state_locks WHERE cluster_id = ${clusterId})`
    : sql`EXISTS (SELECT 1 FROM state_locks WHERE cluster_id = ${clusterId} AND lock_id = ${lockId} AND held_by IS ${writer})`;
}

async function refusalFor(deps: Pick<Deps, 'db'>, clusterId: string, lockId: string | undefined, writer: string | null): Promise<StateWriteRefused | null> {
  const holder = await lockHolder(deps, clusterId);
  if (holder && (holder.lockId !== lockId || holder.heldBy !== writer)) {
    return new StateWriteRefused('locked', 'state is locked by another holder', { lockId: holder.lockId, info: holder.info });
  }
  if (!holder && lockId !== undefined) return new StateWriteRefused('not_locked', 'the lock this write names is not held');
  return null;
}


/**
 * Stores a new state version. Returns the stored (or, for a byte-identical rewrite, the existing)
 * version. Throws StateWriteRefused when the lock, lineage or serial forbid it.
 */
export async function writeState(
  deps: StoreDeps,
  input: {
    tenantId: string;
    clusterId: string;
    body: Uint8Array;
    parsed: ParsedState;
    lockId?: string;
    writtenBy: string | null;
    /** Versions kept per state (REZUS_STATE_KEEP_VERSIONS); older ones are deleted. */
    keepVersions?: number;
  },
): Promise<{ version: number; created: boolean }> {
  const { db, sealer, clock } = deps;
  const md5 = md5Base64(input.body);
  for (let attempt = 0; ; attempt++) {
    const refusal = await refusalFor(deps, input.clusterId, input.lockId, input.writtenBy);
    if (refusal) throw refusal;
    const current = await currentVersion(deps, input.clusterId);
    if (current && current.lineage !== input.parsed.lineage) {
      throw new StateWriteRefused('lineage', `state lineage "${input.parsed.lineage}" differs from the stored lineage "${current.lineage}"`);
    }
    if (current && input.parsed.serial < current.serial) {
      throw new StateWriteRefused('stale_serial', `state serial ${input.parsed.serial} is older than the stored serial ${current.serial}`);
    }
    if (current && current.md5 === md5) return { version: current.version, created: false };
    // tofu bumps the serial whenever the content changes; the same serial with other bytes is a
    // second writer working from the same base, which Terraform's own backends refuse too.
    if (current && input.parsed.serial === current.serial) {
      throw new StateWriteRefused('serial_conflict', `state serial ${input.parsed.serial} is already stored with different content`);
    }

    const last = await db
      .select({ n: sql<number>`coalesce(max(${stateVersions.version}), 0)` })
      .from(stateVersions)
      .where(eq(stateVersions.clusterId, input.clusterId))
      .get();
    const version = Number(last?.n ?? 0) + 1;
    const sealed = sealer.seal(input.body, stateContext(input.clusterId, version));
    // The lineage is checked again inside the statement: without a lock two writers may race.
    const sameLineage = sql`coalesce((SELECT lineage FROM state_versions WHERE cluster_id = ${input.clusterId} AND deleted_at IS NULL ORDER BY version DESC LIMIT 1), ${input.parsed.lineage}) = ${input.parsed.lineage}`;
    try {
      const res = await db.run(sql`
        INSERT INTO state_versions (tenant_id, cluster_id, version, serial, lineage, body_sealed, md5, size, written_by, created_at)
        SELECT ${input.tenantId}, ${input.clusterId}, ${version}, ${input.parsed.serial}, ${input.parsed.lineage}, ${sealed}, ${md5},
               ${input.body.byteLength}, ${input.writtenBy}, ${clock.now()}
        WHERE ${lockAllows(input.clusterId, input.lockId, input.writtenBy)} AND ${sameLineage}`);
      if (res.rowsAffected === 1) {
        await pruneVersions(deps, input.clusterId, version, input.keepVersions ?? DEFAULT_KEEP_VERSIONS);
        return { version, created: true };
      }
    } catch (err) {
      if (!isUniqueViolation(err) || attempt >= 3) throw err;
      continue;
    }
    // Nothing inserted: the lock or the lineage changed under us; the next pass names which.
    if (attempt >= 3) throw new StateWriteRefused('locked', 'state changed concurrently; retry');
  }
}

export const DEFAULT_KEEP_VERSIONS = 100;

/** Deletes all but the newest `keep` versions of a state (numbers are dense per cluster). */
async function pruneVersions(deps: Pick<Deps, 'db'>, clusterId: string, newest: number, keep: number): Promise<void> {
  if (newest <= keep) return;
  await deps.db.run(sql`DELETE FROM state_versions WHERE cluster_id = ${clusterId} AND version <= ${newest - keep}`);
}

/** What `writtenBy` says of a version kept aside: written by a run after it lost the state lock. */
export const lateWriter = (runId: string) => `late:${runId}`;

/**
 * Keeps a state body that may not become current (its writer lost the lock: a reaped run whose
 * lock was force-unlocked, an errored.tfstate refused by lineage or serial) as a hidden version:
 * GET never serves it, `GET ?version=N` and the version list show it, so it can be recovered by
 * hand instead of being dropped.
 */
export async function keepRecoverableVersion(
  deps: StoreDeps,
  input: { tenantId: string; clusterId: string; body: Uint8Array; parsed: ParsedState; runId: string },
): Promise<{ version: number }> {
  const md5 = md5Base64(input.body);
  for (let attempt = 0; ; attempt++) {
    const last = await deps.db
      .select({ n: sql<number>`coalesce(max(${stateVersions.version}), 0)` })
      .from(stateVersions)
      .where(eq(stateVersions.clusterId, input.clusterId))
      .get();
    const version = Number(last?.n ?? 0) + 1;
    const now = deps.clock.now();
    try {
      await deps.db.insert(stateVersions).values({
        tenantId: input.tenantId,
        clusterId: input.clusterId,
        version,
        serial: input.parsed.serial,
        lineage: input.parsed.lineage,
        bodySealed: deps.sealer.seal(input.body, stateContext(input.clusterId, version)),
        md5,
        size: input.body.byteLength,
        writtenBy: lateWriter(input.runId),
        createdAt: now,
        deletedAt: now,
      });
      return { version };
    } catch (err) {
      if (!isUniqueViolation(err) || attempt >= 3) throw err;
    }
  }
}

/** The backend DELETE: hides every version from GET but keeps them for history. */
export async function purgeState(deps: StoreDeps, input: { clusterId: string; lockId?: string; by: string | null }): Promise<{ purged: number }> {
  const refusal = await refusalFor(deps, input.clusterId, input.lockId, input.by);
  if (refusal) throw refusal;
  const res = await deps.db.run(sql`
    UPDATE state_versions SET deleted_at = ${deps.clock.now()}
    WHERE cluster_id = ${input.clusterId} AND deleted_at IS NULL AND ${lockAllows(input.clusterId, input.lockId, input.by)}`);
  if (res.rowsAffected === 0) {
    const late = await refusalFor(deps, input.clusterId, input.lockId, input.by);
    if (late) throw late;
  }
  return { purged: res.rowsAffected };
}

/**
 * True while the cluster's current state holds a resource instance, i.e. something may still
 * exist in a cloud. A state left by a successful destroy (no resources) is not live.
 */
export async function hasLiveState(deps: Pick<Deps, 'db' | 'sealer'>, clusterId: string): Promise<boolean> {
  const row = await currentVersion(deps, clusterId);
  if (!row) return false;
  let doc: { resources?: { instances?: unknown[] }[] };
  try {
    doc = JSON.parse(openVersion(deps, row).toString('utf8')) as typeof doc;
  } catch {
    // Unreadable: assume it holds something rather than let the cluster go.
    return true;
  }
  return (doc.resources ?? []).some((r) => (r.instances?.length ?? 0) > 0);
}
