// The database factory for fetch-only hosts (Workers): Hrana over HTTP through @libsql/client/web,
// no file, no migrations (the home runner applies them), no Node module.
import { createClient } from '@libsql/client/web';
import { drizzle } from 'drizzle-orm/libsql/web';
import type { Database } from './client.ts';
import * as schema from './schema/index.ts';

export function openWebDatabase(opts: { url: string; authToken?: string }): Database {
  const client = createClient({ url: opts.url, authToken: opts.authToken });
  return { db: drizzle(client, { schema }), client, url: opts.url, local: false, close: () => client.close() };
}
