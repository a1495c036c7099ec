// A cheap look at whether a node's Talos port accepts connections, so waits on a rebooting node
// can check often without paying a TLS handshake and a gRPC client for every look.
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseNodeAddress } from '../../lib/talos/api/address.ts';

/** Resolves true once a TCP connection opens (then closes it), false on refusal, error or timeout. */
export function portAccepts(address: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
  const { host, port } = parseNodeAddress(address);
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: timeoutMs, ...(signal ? { signal } : {}) });
    const done = (open: boolean): void => {
      socket.destroy();
      resolve(open);
    };
    socket.once('connect', () => done(true));
    socket.once('timeout', () => done(false));
    socket.once('error', () => done(false));
  });
}

/** Between two looks at the port; a refused connection costs next to nothing, so this can be short. */
const LOOK_MS = 20;

/**
 * Waits before the next full probe of a rebooting node: at most `maxMs`, but returns as soon as
 * the port accepts connections again after `seen.down` (set here once the port refused). While the
 * node has not gone down yet, this is a plain wait of `maxMs`.
 */
export async function untilPortReturns(address: string, maxMs: number, seen: { down: boolean }, signal: AbortSignal): Promise<void> {
  const end = performance.now() + maxMs;
  for (;;) {
    const left = end - performance.now();
    if (left <= 0) return;
    const open = await portAccepts(address, Math.min(left, 500), signal);
    signal.throwIfAborted();
    if (!open) seen.down = true;
    else if (seen.down) return;
    const rest = end - performance.now();
    if (rest <= 0) return;
    // Rejects with the run's own reason, as every other wait of a run does.
    await sleep(Math.min(LOOK_MS, rest), undefined, { signal }).catch(() => signal.throwIfAborted());
  }
}
