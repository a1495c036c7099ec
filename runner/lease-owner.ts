import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

/** The worker id a runner claims runs with: its host and process, so a peer can ask whether it still lives. */
export const localWorkerId = () => `${hostname()}:${process.pid}`;

/**
 * Whether the process that held a lease is known to be gone. Only a process on this host can be
 * asked; one elsewhere (or this very process, whose worker cleans up after itself) counts as
 * possibly alive, so its tofu's state lock and credential are kept.
 */
export function leaseOwnerIsGone(owner: string | null | undefined): boolean {
  if (!owner) return false;
  const colon = owner.lastIndexOf(':');
  const host = owner.slice(0, colon);
  const pid = Number(owner.slice(colon + 1));
  if (colon <= 0 || host !== hostname() || !Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) return false;
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
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}
