import { and, desc, eq, lt } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { audit } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { readQuery } from '../../lib/http/validate.ts';
import type { AppEnv } from '../context.ts';

export const auditQuery = z.strictObject({
  before: z.coerce.number().int().optional(),
  limit: z.coerce.number().int().min(1).max(500).optional(),
});

export function auditRoutes() {
  const app = new Hono<AppEnv>();
  app.get('/', requireScope('read'), async (c) => {
    const q = readQuery(c, auditQuery);
    const p = c.var.principal;
    const rows = await c.var.deps.db
      .select()
      .from(audit)
      .where(and(p.admin ? undefined : eq(audit.tenantId, p.tenantId!), q.before ? lt(audit.id, q.before) : undefined))
      .orderBy(desc(audit.id))
      .limit(q.limit ?? 100);
    return c.json({ entries: rows });
  });
  return app;
}
