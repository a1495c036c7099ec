import { createClient, type Client } from '@libsql/client';
import { drizzle, type LibSQLDatabase } from 'drizzle-orm/libsql';
import { migrate } from 'drizzle-orm/libsql/migrator';
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
