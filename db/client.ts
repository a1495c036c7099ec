import { createClient, type Client } from '@libsql/client';
import { drizzle, type LibSQLDatabase } from 'drizzle-orm/libsql';
import { migrate } from 'drizzle-orm/libsql/migrator';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import * as schema from './schema/index.ts';

export type Db = LibSQLDatabase<typeof schema>;

export interface Database {
  db: Db;
  client: Client;
  url: string;
  /** true for an embedded file database (WAL, VACUUM INTO backups possible). */
  local: boolean;
  close(): void;
}

export const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations', import.meta.url));

export async function openDatabase(opts: { url: string; authToken?: string }): Promise<Database> {
  const local = opts.url.startsWith('file:') || opts.url === ':memory:';
  const client = createClient({ url: opts.url, authToken: opts.authToken });
  if (local) {
    // WAL lets the dashboard read while the worker writes; busy_timeout makes two workers on one
    // file wait for each other instead of failing with SQLITE_BUSY.
    await client.execute('PRAGMA journal_mode = WAL');
    await client.execute('PRAGMA busy_timeout = 5000');
    await client.execute('PRAGMA foreign_keys = ON');
  }
  const db = drizzle(client, { schema });
  return { db, client, url: opts.url, local, close: () => client.close() };
}

export async function runMigrations(database: Database): Promise<void> {
  await migrate(database.db, { migrationsFolder: MIGRATIONS_DIR });
}

/** Number of migrations in the journal vs applied, for /readyz. */
export async function migrationStatus(database: Database): Promise<{ expected: number; applied: number }> {
  const journal = JSON.parse(await readFile(`${MIGRATIONS_DIR}/meta/_journal.json`, 'utf8')) as {
    entries: unknown[];
  };
  const applied = await database.client
    .execute('SELECT count(*) AS n FROM __drizzle_migrations')
    .then((rs) => Number(rs.rows[0]?.n ?? 0))
    // No migrations table yet means none applied.
    .catch(() => 0);
  return { expected: journal.entries.length, applied };
}
