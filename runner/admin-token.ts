import { isNull } from 'drizzle-orm';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import type { Db } from '../db/client.ts';
import { tokens } from '../db/schema/index.ts';
import { generateToken, hashToken, SCOPES } from '../lib/auth/tokens.ts';
import { newId } from '../lib/ids.ts';

/**
 * First start: mint the admin token, keep only its hash in the database, and hand the plain
 * token over once — in `<dataDir>/admin-token` (0600) and on stdout. Later starts do nothing.
 */
export async function ensureAdminToken(db: Db, dataDir: string, now: number, print: (line: string) => void): Promise<void> {
  const existing = await db.select({ id: tokens.id }).from(tokens).where(isNull(tokens.tenantId)).get();
  if (existing) return;
  const token = generateToken();
  await db.insert(tokens).values({ id: newId('tok'), tenantId: null, name: 'admin', hash: hashToken(token), scopes: [...SCOPES], createdAt: now });
  const path = join(dataDir, 'admin-token');
  const fh = await open(path, 'w', 0o600);
  try {
    await fh.writeFile(token + '\n');
  } finally {
    await fh.close();
  }
  print(`admin token created (shown once, also written to ${path}): ${token}`);
}
