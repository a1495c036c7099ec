import { and, eq, isNull } from 'drizzle-orm';
import { webhookDeliveries } from '../../db/schema/index.ts';
import type { Deps } from '../context.ts';

export interface Delivery {
  tenantId: string;
  deliveryId: string;
  runId: string | null;
  /** Set on a GitHub delivery that was refused: what its URL asked for (see the schema). */
  refusedFor: string | null;
  receivedAt: number;
}

export const MAX_DELIVERY_ID_CHARS = 200;

export async function findDelivery(deps: Pick<Deps, 'db'>, tenantId: string, deliveryId: string): Promise<Delivery | null> {
  const row = await deps.db
    .select()
    .from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.tenantId, tenantId), eq(webhookDeliveries.deliveryId, deliveryId)))
    .get();
  return row ?? null;
}

/**
 * The INSERT of a delivery row, for a db.batch that commits it with the run it starts: the row
 * never exists without its run, nor the run without it. A copy of a recorded delivery fails the
 * batch on the unique index (tenant, delivery id).
 */
export function insertDelivery(deps: Pick<Deps, 'db' | 'clock'>, input: { tenantId: string; deliveryId: string; runId: string | null }) {
  return deps.db.insert(webhookDeliveries).values(deliveryRow(deps, input));
}

/**
 * The DELETE that lets a refused GitHub delivery start its run after all, for the batch that
 * inserts it again with the run: it removes the refusal only when it was for the same request.
 * Any other row stays, so the batch's INSERT fails on the unique index and nothing is queued.
 */
export function releaseRefusal(deps: Pick<Deps, 'db'>, input: { tenantId: string; deliveryId: string; refusedFor: string }) {
  return deps.db
    .delete(webhookDeliveries)
    .where(
      and(
        eq(webhookDeliveries.tenantId, input.tenantId),
        eq(webhookDeliveries.deliveryId, input.deliveryId),
        isNull(webhookDeliveries.runId),
        eq(webhookDeliveries.refusedFor, input.refusedFor),
      ),
    );
}

/**
 * Records a delivery id that starts no run unless the tenant already has it. The unique index
 * decides, so of two copies arriving at once one is recorded: the other gets `recorded: false`
 * and the first one's row.
 */
export async function recordDelivery(
  deps: Pick<Deps, 'db' | 'clock'>,
  input: { tenantId: string; deliveryId: string; runId?: string | null; refusedFor?: string },
): Promise<{ recorded: true; delivery: Delivery } | { recorded: false; existing: Delivery }> {
  const inserted = await deps.db.insert(webhookDeliveries).values(deliveryRow(deps, input)).onConflictDoNothing().returning();
  if (inserted.length) return { recorded: true, delivery: inserted[0]! };
  const existing = await findDelivery(deps, input.tenantId, input.deliveryId);
  if (!existing) throw new Error('delivery vanished while being recorded');
  return { recorded: false, existing };
}

function deliveryRow(deps: Pick<Deps, 'clock'>, input: { tenantId: string; deliveryId: string; runId?: string | null; refusedFor?: string }): Delivery {
  if (input.deliveryId.length === 0 || input.deliveryId.length > MAX_DELIVERY_ID_CHARS) {
    throw new Error(`delivery id must be 1–${MAX_DELIVERY_ID_CHARS} characters`);
  }
  return { tenantId: input.tenantId, deliveryId: input.deliveryId, runId: input.runId ?? null, refusedFor: input.refusedFor ?? null, receivedAt: deps.clock.now() };
}
