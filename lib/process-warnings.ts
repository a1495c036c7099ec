import type { Logger } from './log.ts';

/**
 * Node prints process warnings (MaxListenersExceededWarning, deprecations) as plain text on
 * stderr, where the runner writes JSON lines only; this sends them through the logger instead.
 * Node's printer is an ordinary 'warning' listener, so removing it silences the text form.
 */
export function routeProcessWarnings(log: Logger, proc: NodeJS.Process = process): void {
  proc.removeAllListeners('warning');
  proc.on('warning', (w: Error & { code?: string }) => {
    log.warn('process warning', { name: w.name, ...(w.code ? { code: w.code } : {}), warning: w.message });
  });
}
