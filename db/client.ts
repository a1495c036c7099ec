import type { Client } from '@libsql/client';
import type { BatchItem } from 'drizzle-orm/batch';
import type { LibSQLDatabase } from 'drizzle-orm/libsql';
import { migrate } from 'drizzle-orm/libsql/migrator';
import { chmod, open } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import * as schema from './schema/index.ts';

export type Db = LibSQLDatabase<typeof schema>;
/** One statement of a `db.batch` (one transaction, one commit). */
export type DbStatement = BatchItem<'sqlite'>;

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
  const file = localPath(opts.url);
  // Created owner-only before SQLite opens it; SQLite gives its -wal and -shm files the mode of
  // the database file. The chmods cover files an older version created with the umask's mode.
  if (file) await (await open(file, 'a', 0o600)).close();
  // An embedded database needs only the SQLite driver: the remote clients (and drizzle's driver
  // for them) bring ws and zlib, tens of milliseconds of every start.
  const [{ createClient }, { drizzle }] = local
    ? await Promise.all([import('@libsql/client/sqlite3'), import('drizzle-orm/libsql/sqlite3')])
    : await Promise.all([import('@libsql/client'), import('drizzle-orm/libsql')]);
  const client = createClient({ url: opts.url, authToken: opts.authToken });
  if (local) {
    // WAL lets the dashboard read while the worker writes; busy_timeout makes two workers on one
    // file wait for each other instead of failing with SQLITE_BUSY.
    await client.execute('PRAGMA journal_mode = WAL');
    await client.execute('PRAGMA busy_timeout = 5000');
    await client.execute('PRAGMA foreign_keys = ON');
  }
  if (file) await Promise.all(['', '-wal', '-shm'].map((suffix) => chmod(file + suffix, 0o600).catch(() => undefined)));
  const db = drizzle(client, { schema });
  return { db, client, url: opts.url, local, close: () => client.close() };
}

export async function runMigrations(database: Database): Promise<void> {
  await migrate(database.db, { migrationsFolder: MIGRATIONS_DIR });
}

/** The file of a `file:` URL (query string dropped); none for memory or remote databases. */
export function localPath(url: string): string | undefined {
  if (!url.startsWith('file:')) return undefined;
  const p = url.slice('file:'.length).split('?')[0]!;
  if (p === '' || p === ':memory:') return undefined;
  return p.startsWith('//') ? fileURLToPath(url.split('?')[0]!) : p;
}
