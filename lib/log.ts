import { withoutSqlParams } from './errors.ts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** One JSON object per line on stderr. Callers pass ids and counts, never secret values. */
export function createLogger(level: LogLevel = 'info', write: (line: string) => void = (l) => process.stderr.write(l + '\n')): Logger {
  const at = (lvl: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < ORDER[level]) return;
    const line = JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...fields });
    // A field carrying a failed query's parameters (String(err) of a drizzle error) is cut here too.
    write(line.includes('params:') ? JSON.stringify(JSON.parse(line, (_k, v: unknown) => (typeof v === 'string' ? withoutSqlParams(v) : v))) : line);
  };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
