import { eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { webhookEdgeSecrets, webhookSecrets } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { generateWebhookSecret } from '../../lib/auth/webhook.ts';
import { DomainError } from '../../lib/errors.ts';
import { recordAudit } from '../audit/record.ts';
import type { AppEnv, Deps } from '../context.ts';
import { loadTenant } from '../inventory/load.ts';
import { RUNS_AT_HOME } from '../edge/refuse.ts';

export const webhookSecretContext = (tenantId: string) => `webhook:${tenantId}`;

/**
 * The tenant's current webhook secret in clear, for verifying a delivery; null when none was minted.
 * A host with the edge key reads the edge-sealed copy; a host without the master key (the Worker)
 * gets null for a secret minted before the edge key was configured, like an unknown tenant.
 */
export async function loadWebhookSecret(deps: Pick<Deps, 'db' | 'sealer' | 'webhookSealer'>, tenantId: string): Promise<string | null> {
  if (deps.webhookSealer) {
    const edge = await deps.db.select().from(webhookEdgeSecrets).where(eq(webhookEdgeSecrets.tenantId, tenantId)).get();
    if (edge) return deps.webhookSealer.openText(edge.secretSealed, webhookSecretContext(tenantId));
  }
  const row = await deps.db.select().from(webhookSecrets).where(eq(webhookSecrets.tenantId, tenantId)).get();
  if (!row) return null;
  try {
    return deps.sealer.openText(row.secretSealed, webhookSecretContext(tenantId));
  } catch (err) {
    if (err instanceof DomainError && err.code === RUNS_AT_HOME) return null;
    throw err;
  }
}

export function webhookSecretRoutes() {
  const app = new Hono<AppEnv>();

  // Mints or rotates; the old secret stops verifying at once. Shown only in this answer.
  app.post('/:tenant/webhook-secret', requireScope('write'), async (c) => {
    const tenant = await loadTenant(c, c.req.param('tenant'));
    const { db, sealer, webhookSealer, clock } = c.var.deps;
    const secret = generateWebhookSecret();
    const context = webhookSecretContext(tenant.id);
    const row = { tenantId: tenant.id, secretSealed: sealer.seal(secret, context), createdAt: clock.now() };
    // Sealed for the edge too, or an older edge copy removed, so the Worker never verifies with a rotated-out secret.
    const edgeRow = webhookSealer ? { tenantId: tenant.id, secretSealed: webhookSealer.seal(secret, context), createdAt: row.createdAt } : null;
    const [prior] = await db.select({ at: webhookSecrets.createdAt }).from(webhookSecrets).where(eq(webhookSecrets.tenantId, tenant.id));
    await db.batch([
      db.insert(webhookSecrets).values(row).onConflictDoUpdate({ target: webhookSecrets.tenantId, set: row }),
      edgeRow
        ? db.insert(webhookEdgeSecrets).values(edgeRow).onConflictDoUpdate({ target: webhookEdgeSecrets.tenantId, set: edgeRow })
        : db.delete(webhookEdgeSecrets).where(eq(webhookEdgeSecrets.tenantId, tenant.id)),
    ]);
    await recordAudit(c, { action: prior ? 'webhook_secret.rotate' : 'webhook_secret.create', target: tenant.id, tenantId: tenant.id });
    return c.json(
      { tenant: tenant.id, secret, header: 'X-Rezus-Signature', createdAt: row.createdAt, rotated: prior !== undefined },
      201,
    );
  });

  return app;
}
