import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

const readProc = (path: string): string | undefined => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/** This boot of the host: a pid and a start time repeat across boots, this does not. */
const BOOT_ID = readProc('/proc/sys/kernel/random/boot_id')?.trim().slice(0, 8);

/**
 * Which process, of all that have had `pid` on this host: the boot and the process's start time
 * (clock ticks since boot). A container restarted on the same host often gets the very pid (and
 * hostname) it had, so the pid alone would take the dead runner for this one.
 */
function incarnation(pid: number): string | undefined {
  const stat = readProc(`/proc/${pid}/stat`);
  if (!stat || !BOOT_ID) return undefined;
  // Fields after the command (which may hold spaces and parentheses): state is the 3rd, starttime the 22nd.
  const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  return start ? `${BOOT_ID}.${start}` : undefined;
}

/**
 * The worker id a runner claims runs with: its host, process and that process's incarnation
 * (`host:pid@boot.start`), so a peer can ask whether it still lives.
 */
export const localWorkerId = (): string => workerIdOf(process.pid);

/** The worker id the process `pid` of this host would claim runs with. */
export function workerIdOf(pid: number): string {
  const inc = incarnation(pid);
  return `${hostname()}:${pid}${inc ? `@${inc}` : ''}`;
}

/**
 * Whether the process that held a lease is known to be gone. Only a process on this host can be
 * asked; one elsewhere (or this very process, whose worker cleans up after itself) counts as
 * possibly alive, so its tofu's state lock and credential are kept. An id that names the
 * incarnation is gone once the pid is free or held by another process (this one included).
 */
export function leaseOwnerIsGone(owner: string | null | undefined): boolean {
  if (!owner) return false;
  const colon = owner.lastIndexOf(':');
  const host = owner.slice(0, colon);
  const [pidText, inc] = owner.slice(colon + 1).split('@');
  const pid = Number(pidText);
  if (colon <= 0 || host !== hostname() || !Number.isSafeInteger(pid) || pid <= 0) return false;
  const now = inc === undefined ? undefined : incarnation(pid);
  if (inc !== undefined && now !== undefined) return now !== inc || isZombie(pid);
  if (pid === process.pid) return false;
  try {
    // Signal 0 only checks that the pid exists; a stopped (SIGSTOP) process still does.
    process.kill(pid, 0);
    return isZombie(pid);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** A killed process nobody reaped yet (a container without an init) still answers signal 0. */
function isZombie(pid: number): boolean {
  const stat = readProc(`/proc/${pid}/stat`);
  return stat !== undefined && stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
}
