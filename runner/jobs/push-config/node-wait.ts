import { RunError } from '../../../lib/jobs/executor.ts';
import { isTalosApiError, type VersionResult } from '../../../lib/talos/api/index.ts';
import type { PushTimings } from '../../../functions/context.ts';
import type { ClusterAccess } from '../cluster-access.ts';
import { pause } from '../pause.ts';
import { untilPortReturns, type PortWatch } from '../node-port.ts';

/** What a wait saw last when its last look at the port was refused (no probe was made then). */
const REFUSED = Symbol('refused');
const describe = (last: unknown) => (isTalosApiError(last) ? last.message : last === REFUSED ? 'the port refused connections (nothing listens there yet)' : 'no answer yet');

/** One Version call over mTLS on a fresh connection, so a retry never waits on one the rebooting node dropped. */
function probe(access: ClusterAccess, address: string, deadlineMs: number, signal: AbortSignal): Promise<VersionResult> {
  return access.withTalos(address, (client) => client.version({ deadlineMs, signal }));
}

/**
 * Polls until the node answers Version over mTLS with the cluster's admin certificate: that is
 * what "configured" means from here. Until then every failure (maintenance certificate still up,
 * node rebooting) is expected; only the timeout ends the wait, naming the last failure.
 */
export async function waitForMtls(
  access: ClusterAccess,
  address: string,
  t: PushTimings,
  signal: AbortSignal,
  opts: { rebooting?: boolean } = {},
): Promise<VersionResult> {
  const end = Date.now() + t.readyTimeoutMs;
  const seen: PortWatch = { down: false };
  let last: unknown;
  // A node that just took its first config reboots: probing it before it went down would only
  // fail a TLS handshake against its maintenance certificate.
  if (opts.rebooting) await untilPortReturns(address, Math.min(t.pollMs, t.readyTimeoutMs), seen, signal);
  for (;;) {
    signal.throwIfAborted();
    if (seen.refusing) last = REFUSED;
    else {
      try {
        return await probe(access, address, Math.max(1, Math.min(t.callDeadlineMs, end - Date.now())), signal);
      } catch (err) {
        if (signal.aborted) throw err;
        last = err;
      }
    }
    if (Date.now() + t.pollMs >= end) {
      throw new RunError(
        `the node did not answer over mTLS within ${Math.round(t.readyTimeoutMs / 1000)} s; last: ${describe(last)}`,
        isTalosApiError(last) ? { node: last.node, code: last.code, grpcStatus: last.grpcStatus } : {},
      );
    }
    // A node that went down to reboot is probed again as soon as its port reopens.
    await untilPortReturns(address, t.pollMs, seen, signal);
  }
}

/**
 * After an apply that reboots a configured node, the old boot may still answer for a moment;
 * wait (bounded) until it stops answering so the next success is the new boot. Returns whether
 * the node was seen going down.
 */
export async function waitForGoingDown(
  access: ClusterAccess,
  address: string,
  t: PushTimings,
  windowMs: number,
  signal: AbortSignal,
): Promise<boolean> {
  const end = Date.now() + windowMs;
  while (Date.now() < end) {
    try {
      await probe(access, address, Math.max(1, Math.min(t.callDeadlineMs, end - Date.now())), signal);
    } catch (err) {
      if (signal.aborted) throw err;
      return true;
    }
    await pause(Math.min(t.pollMs, 250), signal);
  }
  return false;
}
