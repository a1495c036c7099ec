import { isTalosApiError } from '../../../lib/talos/api/index.ts';
import { RunError } from '../../../lib/jobs/executor.ts';

export type Channel = 'maintenance' | 'mtls';

/** What each failure usually means for someone standing next to the machine. */
function hint(code: string, channel: Channel, deadlineMs: number): string {
  switch (code) {
    case 'fingerprint-mismatch':
      return 'the node certificate does not match certFingerprint (another machine on that address?); nothing was sent';
    case 'tls':
      return channel === 'maintenance'
        ? 'the node refused TLS without a client certificate: it is not in maintenance mode (already configured?)'
        : "the node is not trusted by, or does not trust, this cluster's CA (configured by another cluster, or still in maintenance mode?)";
    case 'unreachable':
      return 'nothing answers on that address (node down, wrong address or port, firewall?)';
    case 'deadline':
      return `no answer within ${deadlineMs} ms`;
    case 'connection-lost':
      return 'the connection dropped during the call';
    case 'permission-denied':
      return channel === 'maintenance' ? 'the node does not allow this in maintenance mode' : 'the admin certificate lacks the role';
    default:
      return '';
  }
}

/**
 * Turns a Talos client error into a run error that names the step, the node and the code. The
 * client has already cut anything key-like out of the node's message; config bytes never reach it.
 */
export function talosFailure(step: string, err: unknown, channel: Channel, deadlineMs: number): RunError | unknown {
  if (!isTalosApiError(err)) return err;
  const why = hint(err.code, channel, deadlineMs);
  return new RunError(`${step}: ${err.message}${why ? ` (${why})` : ''}`, {
    step,
    node: err.node,
    code: err.code,
    grpcStatus: err.grpcStatus,
  });
}
