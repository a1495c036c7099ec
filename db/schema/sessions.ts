import { index, integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';

/**
 * Dashboard sessions ended by logout. The session itself is a sealed cookie; listing the ended
 * ones (until they would have expired anyway) is what makes logout hold for a copied cookie.
 */
export const endedSessions = sqliteTable(
  'ended_sessions',
  {
    sid: text('sid').primaryKey(),
    expiresAt: integer('expires_at').notNull(),
  },
  (t) => [index('ended_sessions_expires').on(t.expiresAt)],
);
