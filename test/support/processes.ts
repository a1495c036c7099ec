import { readFileSync } from 'node:fs';

/** A process that exited counts as gone even while nobody has reaped it yet (a zombie). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
}
