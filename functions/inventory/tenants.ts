import { and, eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { tenants, tokens } from '../../db/schema/index.ts';
import { requireAdmin, requireScope } from '../auth.ts';
import { DEFAULT_TENANT_SCOPES, SCOPES, generateToken, hashToken } from '../../lib/auth/tokens.ts';
import { ApiError, conflict, notFound } from '../../lib/http/errors.ts';
import { readJson } from '../../lib/http/validate.ts';
import { newId } from '../../lib/ids.ts';
import { recordAudit } from '../audit/record.ts';
import type { AppEnv } from '../context.ts';
import { loadTenant } from './load.ts';
import { dnsLabel } from './schemas.ts';

export const createTenant = z.strictObject({ name: dnsLabel });
export const createToken = z.strictObject({
  name: z.string().min(1).max(100),
  scopes: z.array(z.enum(SCOPES)).min(1).optional(),
});

const publicTenant = (t: typeof tenants.$inferSelect) => ({ id: t.id, name: t.name, createdAt: t.createdAt });

export function tenantRoutes() {
  const app = new Hono<AppEnv>();

  app.post('/', requireAdmin, async (c) => {
    const body = await readJson(c, createTenant);
    const { db, clock } = c.var.deps;
    const existing = await db.select().from(tenants).where(eq(tenants.name, body.name)).get();
    if (existing) throw conflict(`a tenant named "${body.name}" exists`);
    const [row] = await db.insert(tenants).values({ id: newId('tn'), name: body.name, createdAt: clock.now() }).returning();
    return c.json(publicTenant(row!), 201);
  });

  app.get('/', requireScope('read'), async (c) => {
    const p = c.var.principal;
    const rows = await c.var.deps.db
      .select()
      .from(tenants)
      .where(p.admin ? undefined : eq(tenants.id, p.tenantId!))
      .orderBy(tenants.name);
    return c.json({ tenants: rows.map(publicTenant) });
  });

  app.get('/:tenant', requireScope('read'), async (c) => c.json(publicTenant(await loadTenant(c, c.req.param('tenant')))));

  app.post('/:tenant/tokens', requireScope('write'), async (c) => {
    const tenant = await loadTenant(c, c.req.param('tenant'));
    const body = await readJson(c, createToken);
    const p = c.var.principal;
    const scopes = body.scopes ?? DEFAULT_TENANT_SCOPES;
    // A tenant token may mint tokens, but never one stronger than itself.
    const stronger = scopes.filter((s) => !p.scopes.includes(s));
    if (stronger.length) throw new ApiError(403, 'forbidden', `cannot grant scopes this token lacks: ${stronger.join(', ')}`);
    const token = generateToken();
    const row = {
      id: newId('tok'),
      tenantId: tenant.id,
      name: body.name,
      hash: hashToken(token),
      scopes,
      createdAt: c.var.deps.clock.now(),
    };
    await c.var.deps.db.insert(tokens).values(row);
    await recordAudit(c, { action: 'token.create', target: row.id, tenantId: tenant.id, detail: { scopes } });
    return c.json({ id: row.id, name: row.name, tenant: tenant.id, scopes, token }, 201);
  });

  app.get('/:tenant/tokens', requireScope('read'), async (c) => {
    const tenant = await loadTenant(c, c.req.param('tenant'));
    const rows = await c.var.deps.db.select().from(tokens).where(eq(tokens.tenantId, tenant.id));
    return c.json({
      tokens: rows.map((t) => ({ id: t.id, name: t.name, scopes: t.scopes, createdAt: t.createdAt })),
    });
  });

  app.delete('/:tenant/tokens/:token', requireScope('write'), async (c) => {
    const tenant = await loadTenant(c, c.req.param('tenant'));
    const [row] = await c.var.deps.db
      .delete(tokens)
      .where(and(eq(tokens.id, c.req.param('token')), eq(tokens.tenantId, tenant.id)))
      .returning({ id: tokens.id });
    if (!row) throw notFound('token');
    await recordAudit(c, { action: 'token.revoke', target: row.id, tenantId: tenant.id });
    return c.body(null, 204);
  });

  return app;
}
