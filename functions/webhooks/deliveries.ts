import { and, eq } from 'drizzle-orm';
import { webhookDeliveries } from '../../db/schema/index.ts';
import type { Deps } from '../context.ts';

export interface Delivery {
  tenantId: string;
  deliveryId: string;
  runId: string | null;
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
 * Records a delivery id unless the tenant already has it. The unique index decides, so two copies
 * of one delivery arriving at once start one run: the loser gets `recorded: false` and the winner's row.
 */
export async function recordDelivery(
  deps: Pick<Deps, 'db' | 'clock'>,
  input: { tenantId: string; deliveryId: string; runId?: string | null },
): Promise<{ recorded: true; delivery: Delivery } | { recorded: false; existing: Delivery }> {
  if (input.deliveryId.length === 0 || input.deliveryId.length > MAX_DELIVERY_ID_CHARS) {
    throw new Error(`delivery id must be 1–${MAX_DELIVERY_ID_CHARS} characters`);
  }
  const row = { tenantId: input.tenantId, deliveryId: input.deliveryId, runId: input.runId ?? null, receivedAt: deps.clock.now() };
  const inserted = await deps.db.insert(webhookDeliveries).values(row).onConflictDoNothing().returning();
  if (inserted.length) return { recorded: true, delivery: inserted[0]! };
  const existing = await findDelivery(deps, input.tenantId, input.deliveryId);
  if (!existing) throw new Error('delivery vanished while being recorded');
  return { recorded: false, existing };
}

/** Links a recorded delivery to the run it started (recorded first, so the run id comes later). */
export async function setDeliveryRun(deps: Pick<Deps, 'db'>, tenantId: string, deliveryId: string, runId: string): Promise<void> {
  await deps.db
    .update(webhookDeliveries)
    .set({ runId })
    .where(and(eq(webhookDeliveries.tenantId, tenantId), eq(webhookDeliveries.deliveryId, deliveryId)));
}
