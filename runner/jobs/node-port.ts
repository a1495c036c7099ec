// A cheap look at whether a node's Talos port accepts connections, so waits on a rebooting node
// can check often without paying a TLS handshake and a gRPC client for every look.
import { connect } from 'node:net';
import type { DialGuard } from '../../lib/dial-guard.ts';
import { pause } from './pause.ts';
import { parseNodeAddress } from '../../lib/talos/api/address.ts';

/**
 * What one look at a port found: a connection opened (then closed at once), the host refused it
 * (nothing listens there: a rebooting node), or no answer in time (or another error), which says
 * nothing for sure: the look's timeout may simply have been short.
 */
export type PortLook = 'open' | 'refused' | 'no-answer';

export function lookAtPort(address: string, timeoutMs: number, signal?: AbortSignal, guard?: DialGuard): Promise<PortLook> {
  const { host, port } = parseNodeAddress(address);
  // Outside REZUS_NODE_NETWORKS: no connection; the probe that follows names the refusal.
  if (guard?.refusal(host)) return Promise.resolve('no-answer');
  return new Promise((resolve) => {
    // Not connect's own `signal` option: its abort listener stays on the signal until that aborts,
    // and a wait makes thousands of looks on the one signal of a run.
    const socket = connect({ host, port, timeout: timeoutMs, ...(guard ? { lookup: guard.lookup } : {}) });
    const done = (look: PortLook): void => {
      signal?.removeEventListener('abort', aborted);
      socket.destroy();
      resolve(look);
    };
    const aborted = (): void => done('no-answer');
    if (signal?.aborted) return done('no-answer');
    signal?.addEventListener('abort', aborted, { once: true });
    socket.once('connect', () => done('open'));
    socket.once('timeout', () => done('no-answer'));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code === 'ECONNREFUSED' ? 'refused' : 'no-answer'));
  });
}

/**
 * What one wait on a rebooting node has learnt, across its calls to untilPortReturns: whether the
 * port was seen down, whether the last look was refused, and when the wait began.
 */
export interface PortWatch {
  /**
   * The port was seen down and has not been seen back since. Finding it open again ends the wait
   * at once and clears this: a node that came back but fails the probe (apid not up yet, a
   * certificate it does not accept) is probed once per wait after that, not in a loop.
   */
  down: boolean;
  /**
   * The last look was refused: nothing listens at the port now, so a full probe (a TLS dial and a
   * call) can only fail the same way and is not worth making until a look finds it open.
   */
  refusing?: boolean;
  since?: number;
}

/**
 * The pause before the next look at the port. A look costs this process about 0.1 ms of CPU (a
 * socket, a connect, an error), and a real node takes one to several minutes to install and
 * reboot: a look every 20 ms all that time is thousands per node, a good part of a small host's
 * core for a rack of them. So the pause grows with the wait, a sixteenth of it so far: a node
 * back after 2 s is noticed within ~125 ms, after a minute within LOOK_MAX_MS.
 */
/** How long one look waits for the TCP handshake. */
const LOOK_TIMEOUT_MS = 500;
const LOOK_MIN_MS = 20;
const LOOK_MAX_MS = 250;
export const lookPauseMs = (waitedMs: number): number => Math.min(LOOK_MAX_MS, Math.max(LOOK_MIN_MS, waitedMs / 16));

/**
 * Waits before the next full probe of a rebooting node: at most `maxMs`, but returns as soon as
 * the port accepts connections again after `seen.down` (set here once the port refused). While the
 * node has not gone down yet, or once it has been seen back, this is a plain wait of `maxMs`. A
 * wait's first call pauses before its first look: it starts right after the node answered (it
 * took a config, an upgrade), so a look then finds the port as open as it was, and costs the node
 * an accepted connection for nothing.
 */
export async function untilPortReturns(address: string, maxMs: number, seen: PortWatch, signal: AbortSignal, guard?: DialGuard): Promise<void> {
  const end = performance.now() + maxMs;
  const starting = seen.since === undefined;
  seen.since ??= performance.now();
  for (let look = !starting; ; look = true) {
    if (look) {
      const left = end - performance.now();
      if (left <= 0) return;
      const timeoutMs = Math.min(left, LOOK_TIMEOUT_MS);
      const found = await lookAtPort(address, timeoutMs, signal, guard);
      signal.throwIfAborted();
      seen.refusing = found === 'refused';
      // A look cut short by the end of the wait says nothing about the node: over a long round
      // trip an open port would read as down, and the next wait would end at its first look.
      if (found === 'refused' || (found === 'no-answer' && timeoutMs === LOOK_TIMEOUT_MS)) seen.down = true;
      else if (found === 'open' && seen.down) {
        seen.down = false;
        return;
      }
    }
    const rest = end - performance.now();
    const wait = Math.min(lookPauseMs(performance.now() - seen.since), rest);
    if (wait > 0) await pause(wait, signal);
    else signal.throwIfAborted();
    // A pause that took the rest of the wait ends it: a look now would have no time to be answered.
    if (wait >= rest) return;
  }
}
