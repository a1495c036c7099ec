// What STUN last told the hub, kept in the database so every host (and GET …/mesh) sees it.
// Portable: the probing itself (stun.ts, node:dgram) runs in the runner.
import { eq } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { meshStun } from '../../db/schema/index.ts';
import type { NatMapping } from './stun.ts';
import { localOnly } from './prefixes.ts';

export type StunRow = typeof meshStun.$inferSelect;
const ROW = 'hub';

export async function loadStun(db: Db): Promise<StunRow | null> {
  return (await db.select().from(meshStun).where(eq(meshStun.id, ROW)).get()) ?? null;
}

export interface StunObservation {
  mapping: NatMapping;
  publicAddress: string | null;
  endpoint: string | null;
  observed: StunRow['observed'];
  at: number;
}

/** Records a check; `changedAt` moves only when the usable endpoint does. Returns the previous row. */
export async function recordStun(db: Db, o: StunObservation): Promise<StunRow | null> {
  const before = await loadStun(db);
  const changedAt = before && before.endpoint === o.endpoint ? before.changedAt : o.at;
  const values = { mapping: o.mapping, publicAddress: o.publicAddress, endpoint: o.endpoint, observed: o.observed, checkedAt: o.at, changedAt };
  await db.insert(meshStun).values({ id: ROW, ...values }).onConflictDoUpdate({ target: meshStun.id, set: values });
  return before;
}

/** The operator-facing reading of a check: what nodes dial and, when nothing usable, what to do. */
export function stunAdvice(row: Pick<StunRow, 'mapping' | 'endpoint'> & { publicAddress?: string | null } | null): string {
  if (!row) return 'no STUN check yet (set REZUS_MESH_STUN_SERVERS on the runner)';
  const local = row.publicAddress ? localOnly(row.publicAddress) : undefined;
  if (local && row.endpoint === null && (row.mapping === 'none' || row.mapping === 'endpoint-independent')) {
    return `the STUN servers see the hub as ${row.publicAddress}, a ${local} address nodes elsewhere cannot dial: use STUN servers on the internet; the endpoint is left as it was`;
  }
  switch (row.mapping) {
    case 'none':
      return `no NAT: nodes dial ${row.endpoint}`;
    case 'endpoint-independent':
      return `behind a NAT with a stable mapping: nodes dial ${row.endpoint}; the router must forward that UDP port to the hub`;
    case 'endpoint-dependent':
      return 'behind a symmetric NAT: nodes cannot dial in; use the relay (PUT …/mesh {"relay": …})';
    default:
      return 'STUN servers did not both answer; the endpoint is left as it was';
  }
}
