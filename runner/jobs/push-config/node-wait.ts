import { RunError } from '../../../lib/jobs/executor.ts';
import { isTalosApiError, type VersionResult } from '../../../lib/talos/api/index.ts';
import type { PushTimings } from '../../../functions/context.ts';
import type { ClusterAccess } from '../cluster-access.ts';
import { untilPortReturns, type PortWatch } from '../node-port.ts';

/** What a wait saw last when its last look at the port was refused (no probe was made then). */
const REFUSED = Symbol('refused');
/** What a wait saw last when the node answered from the boot it had before it took the config. */
const SAME_BOOT = Symbol('same-boot');
const describe = (last: unknown) =>
  isTalosApiError(last)
    ? last.message
    : last === REFUSED
      ? 'the port refused connections (nothing listens there yet)'
      : last === SAME_BOOT
        ? 'the node still answers from its previous boot (it has not rebooted yet)'
        : 'no answer yet';

/**
 * One Version call over mTLS on a fresh connection, so a retry never waits on one the rebooting
 * node dropped; with `bootedAfter`, SystemStat too, and an answer from that boot does not count.
 */
function probe(access: ClusterAccess, address: string, deadlineMs: number, signal: AbortSignal, bootedAfter?: number): Promise<VersionResult | typeof SAME_BOOT> {
  const call = { deadlineMs, signal };
  return access.withTalos(address, async (client) => {
    if (bootedAfter === undefined) return client.version(call);
    const [version, stat] = await Promise.all([client.version(call), client.systemStat(call)]);
    return stat.bootTime === bootedAfter ? SAME_BOOT : version;
  });
}

/**
 * Polls until the node answers Version over mTLS with the cluster's admin certificate: that is
 * what "configured" means from here. Until then every failure (maintenance certificate still up,
 * node rebooting) is expected; only the timeout ends the wait, naming the last failure.
 * `bootedAfter`: the boot time (SystemStat) the node had before it was told to reboot; answers
 * from that boot are not the node configured, as it may take minutes to stop its pods first.
 */
export async function waitForMtls(
  access: ClusterAccess,
  address: string,
  t: PushTimings,
  signal: AbortSignal,
  opts: { rebooting?: boolean; bootedAfter?: number } = {},
): Promise<VersionResult> {
  const end = Date.now() + t.readyTimeoutMs;
  const seen: PortWatch = { down: false };
  let last: unknown;
  // A node that just took its first config reboots: probing it before it went down would only
  // fail a TLS handshake against its maintenance certificate.
  if (opts.rebooting) await untilPortReturns(address, Math.min(t.pollMs, t.readyTimeoutMs), seen, signal, access.dialGuard);
  for (;;) {
    signal.throwIfAborted();
    if (seen.refusing) last = REFUSED;
    else {
      const deadlineMs = Math.max(1, Math.min(t.callDeadlineMs, end - Date.now()));
      try {
        const answer = await probe(access, address, deadlineMs, signal, opts.bootedAfter);
        if (answer !== SAME_BOOT) return answer;
        last = SAME_BOOT;
      } catch (err) {
        // Only the node's answers are worth waiting out: anything else (the admin certificate
        // could not be minted, say, or an address the runner may not dial) would fail the same
        // way for the whole wait.
        if (signal.aborted || !isTalosApiError(err) || err.code === 'not-allowed') throw err;
        // A probe whose deadline the wait's own end cut short says nothing about the node: the
        // timeout names what the probe before it found.
        const cutShort = err.code === 'deadline' && deadlineMs < t.callDeadlineMs && last !== undefined;
        if (!cutShort) last = err;
      }
    }
    if (Date.now() + t.pollMs >= end) {
      throw new RunError(
        `the node did not answer over mTLS within ${Math.round(t.readyTimeoutMs / 1000)} s; last: ${describe(last)}`,
        isTalosApiError(last) ? { node: last.node, code: last.code, grpcStatus: last.grpcStatus } : {},
      );
    }
    // A node that went down to reboot is probed again as soon as its port reopens.
    await untilPortReturns(address, t.pollMs, seen, signal, access.dialGuard);
  }
}
