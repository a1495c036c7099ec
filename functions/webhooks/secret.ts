import { eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { webhookSecrets } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { generateWebhookSecret } from '../../lib/auth/webhook.ts';
import { recordAudit } from '../audit/record.ts';
import type { AppEnv, Deps } from '../context.ts';
import { loadTenant } from '../inventory/load.ts';

export const webhookSecretContext = (tenantId: string) => `webhook:${tenantId}`;

/** The tenant's current webhook secret in clear, for verifying a delivery; null when none was minted. */
export async function loadWebhookSecret(deps: Pick<Deps, 'db' | 'sealer'>, tenantId: string): Promise<string | null> {
  const row = await deps.db.select().from(webhookSecrets).where(eq(webhookSecrets.tenantId, tenantId)).get();
  return row ? deps.sealer.openText(row.secretSealed, webhookSecretContext(tenantId)) : null;
}

export function webhookSecretRoutes() {
  const app = new Hono<AppEnv>();

  // Mints or rotates; the old secret stops verifying at once. Shown only in this answer.
  app.post('/:tenant/webhook-secret', requireScope('write'), async (c) => {
    const tenant = await loadTenant(c, c.req.param('tenant'));
    const { db, sealer, clock } = c.var.deps;
    const secret = generateWebhookSecret();
    const row = { tenantId: tenant.id, secretSealed: sealer.seal(secret, webhookSecretContext(tenant.id)), createdAt: clock.now() };
    const [prior] = await db.select({ at: webhookSecrets.createdAt }).from(webhookSecrets).where(eq(webhookSecrets.tenantId, tenant.id));
    await db.insert(webhookSecrets).values(row).onConflictDoUpdate({ target: webhookSecrets.tenantId, set: row });
    await recordAudit(c, { action: prior ? 'webhook_secret.rotate' : 'webhook_secret.create', target: tenant.id, tenantId: tenant.id });
    return c.json({ tenant: tenant.id, secret, header: 'X-Rezus-Signature', createdAt: row.createdAt, rotated: prior !== undefined }, 201);
  });

  return app;
}
