import type { Context } from 'hono';
import { audit } from '../../db/schema/index.ts';
import type { AppEnv } from '../context.ts';

/** Who did what to which object; the detail holds ids and names, never secret values. */
export async function recordAudit(
  c: Context<AppEnv>,
  entry: { action: string; target: string; tenantId?: string | null; detail?: Record<string, unknown> },
) {
  const { db, clock } = c.var.deps;
  await db.insert(audit).values({
    at: clock.now(),
    actor: c.var.principal.tokenId,
    tenantId: entry.tenantId ?? null,
    action: entry.action,
    target: entry.target,
    detail: entry.detail ?? null,
  });
}
