// Portable: the journal is bundled with the code, so the Worker and the runner agree on what
// "all migrations applied" means without reading files at run time.
import type { Client } from '@libsql/client';
import journal from './migrations/meta/_journal.json' with { type: 'json' };

/** Number of migrations in the journal vs applied, for /readyz. */
export async function migrationStatus(client: Pick<Client, 'execute'>): Promise<{ expected: number; applied: number }> {
  const applied = await client
    .execute('SELECT count(*) AS n FROM __drizzle_migrations')
    .then((rs) => Number(rs.rows[0]?.n ?? 0))
    // No migrations table yet means none applied.
    .catch(() => 0);
  return { expected: journal.entries.length, applied };
}
