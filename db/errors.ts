/** SQLite's unique (or primary key) constraint failed, however the libsql client wrapped it. */
export function isUniqueViolation(err: unknown): boolean {
  const parts: unknown[] = [];
  for (let e: unknown = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) parts.push((e as { message?: unknown; code?: unknown }).message, (e as { code?: unknown }).code);
  return parts.some((p) => typeof p === 'string' && /UNIQUE constraint failed|SQLITE_CONSTRAINT_(UNIQUE|PRIMARYKEY)/.test(p));
}
