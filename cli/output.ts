import { stringify } from 'yaml';
import { usageError } from './exit.ts';

export type OutputFormat = 'table' | 'json' | 'yaml';

export function parseFormat(v: string | undefined): OutputFormat {
  if (v === undefined || v === 'table' || v === 'wide') return 'table';
  if (v === 'json' || v === 'yaml') return v;
  throw usageError(`-o ${v}: use table, json or yaml`);
}

export const toYaml = (v: unknown) => stringify(v, { lineWidth: 0 });

/** Prints a value as JSON or YAML; the table form is the caller's. */
export function printData(format: Exclude<OutputFormat, 'table'>, value: unknown): void {
  process.stdout.write(format === 'json' ? `${JSON.stringify(value, null, 2)}\n` : toYaml(value));
}

export interface Column<T> {
  header: string;
  value: (row: T) => string | number | null | undefined;
}

/** kubectl-style columns: upper-case headers, padded with spaces, no borders, so `awk` can read it. */
export function renderTable<T>(rows: T[], columns: Column<T>[]): string {
  const cells = rows.map((r) => columns.map((c) => String(c.value(r) ?? '-')));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((row) => row[i]!.length)));
  const line = (vals: string[]) => vals.map((v, i) => (i === vals.length - 1 ? v : v.padEnd(widths[i]!))).join('   ').trimEnd();
  return [line(columns.map((c) => c.header.toUpperCase())), ...cells.map(line)].join('\n') + '\n';
}

/** "3m ago" from epoch milliseconds. */
export function age(ms: number | null | undefined, now = Date.now()): string {
  if (!ms) return '-';
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

export const time = (ms: number | null | undefined) => (ms ? new Date(ms).toISOString() : '-');
