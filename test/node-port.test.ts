import { getEventListeners } from 'node:events';
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { lookAtPort, lookPauseMs, untilPortReturns } from '../runner/jobs/node-port.ts';
import { waitForMtls } from '../runner/jobs/push-config/node-wait.ts';
import type { ClusterAccess } from '../runner/jobs/cluster-access.ts';
import { TalosApiError } from '../lib/talos/api/index.ts';

/** What a node that does not take the cluster's admin certificate answers a probe with. */
const refusedTls = (): TalosApiError => new TalosApiError({ node: '127.0.0.1', method: 'MachineService/Version', code: 'tls', grpcStatus: 'UNAVAILABLE', detail: 'tlsv13 alert certificate required' });

describe('node port checks', () => {
  let server: Server | undefined;
  /** Connections the listening server took: every look at an open port is one. */
  let accepted = 0;
  afterEach(async () => {
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = undefined;
    accepted = 0;
  });
  const listen = (port = 0): Promise<number> =>
    new Promise((resolve, reject) => {
      server = createServer((s) => {
        accepted++;
        s.destroy();
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server!.address() as { port: number }).port));
    });

  it('tells an open port from a refusing one', async () => {
    const port = await listen();
    expect(await lookAtPort(`127.0.0.1:${port}`, 1_000)).toBe('open');
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    expect(await lookAtPort(`127.0.0.1:${port}`, 1_000)).toBe('refused');
  });

  it('returns as soon as a port seen closed reopens, well before the longest wait', async () => {
    const port = await listen();
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    const seen = { down: false };
    const reopen = setTimeout(() => void listen(port), 150);
    // The longest wait is far beyond the test's timeout: only an early return passes.
    await untilPortReturns(`127.0.0.1:${port}`, 60_000, seen, new AbortController().signal);
    clearTimeout(reopen);
    expect(seen).toMatchObject({ down: false, refusing: false });
    expect(await lookAtPort(`127.0.0.1:${port}`, 1_000)).toBe('open');
    // Seen back once, the port ends no further wait early: each is a full one again.
    const before = accepted;
    const t0 = performance.now();
    await untilPortReturns(`127.0.0.1:${port}`, 100, seen, new AbortController().signal);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(95);
    expect(accepted).toBeGreaterThan(before);
  });

  it('does not take a port that never went down for a node that came back', async () => {
    const port = await listen();
    const seen = { down: false };
    await untilPortReturns(`127.0.0.1:${port}`, 120, seen, new AbortController().signal);
    expect(seen.down).toBe(false);
  });

  it('begins a wait with a pause, not a look: the node was heard from just before', async () => {
    const port = await listen();
    const seen = { down: false };
    await untilPortReturns(`127.0.0.1:${port}`, 15, seen, new AbortController().signal);
    expect(accepted).toBe(0);
    // The same wait called again (after a probe failed, say) looks at once.
    await untilPortReturns(`127.0.0.1:${port}`, 15, seen, new AbortController().signal);
    expect(accepted).toBe(1);
  });

  it('looks less often the longer a node stays away, within a bound', async () => {
    expect(lookPauseMs(0)).toBe(20);
    expect(lookPauseMs(2_000)).toBe(125);
    expect(lookPauseMs(10 * 60_000)).toBe(250);
    // A node that has not gone down yet: every look is a connection the server sees. At a look
    // every 20 ms, 2.4 s would be ~120 of them.
    const port = await listen();
    const seen = { down: false };
    await untilPortReturns(`127.0.0.1:${port}`, 1_200, seen, new AbortController().signal);
    // The pause goes on from where the wait was, not from 20 ms again, on the wait's next call.
    await untilPortReturns(`127.0.0.1:${port}`, 1_200, seen, new AbortController().signal);
    expect(seen.down).toBe(false);
    expect(accepted).toBeGreaterThan(10);
    expect(accepted).toBeLessThan(70);
  });

  it('leaves no listener on the run\'s signal behind it, however many looks it makes', async () => {
    const port = await listen();
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    const c = new AbortController();
    for (let i = 0; i < 40; i++) expect(await lookAtPort(`127.0.0.1:${port}`, 1_000, c.signal)).toBe('refused');
    await new Promise((r) => setImmediate(r));
    expect(getEventListeners(c.signal, 'abort')).toHaveLength(0);
    // And a stop still ends a look in flight.
    await listen(port);
    c.abort();
    expect(await lookAtPort(`127.0.0.1:${port}`, 1_000, c.signal)).toBe('no-answer');
  });

  it('stops waiting when the run is stopped', async () => {
    const port = await listen();
    const c = new AbortController();
    setTimeout(() => c.abort(new Error('stopped')), 50);
    await expect(untilPortReturns(`127.0.0.1:${port}`, 60_000, { down: false }, c.signal)).rejects.toThrow('stopped');
  });

  it('makes no TLS dial to a node whose port refuses, and names the refusal when the wait ends', async () => {
    const port = await listen();
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    let dials = 0;
    const talosClient = async (): Promise<never> => {
      dials++;
      throw refusedTls();
    };
    const access = { talosClient, withTalos: async () => talosClient() } as unknown as ClusterAccess;
    const timings = { callDeadlineMs: 100, readyTimeoutMs: 300, pollMs: 40 };
    await expect(waitForMtls(access, `127.0.0.1:${port}`, timings, new AbortController().signal, { rebooting: true })).rejects.toThrow(/last: the port refused connections/);
    expect(dials).toBe(0);
    // The same wait at a port that accepts connections does probe it.
    await listen(port);
    await expect(waitForMtls(access, `127.0.0.1:${port}`, timings, new AbortController().signal, { rebooting: true })).rejects.toThrow(/did not answer over mTLS/);
    expect(dials).toBeGreaterThan(0);
  });

  it('probes a node that came back but refuses the probe once per poll, not in a loop', async () => {
    const port = await listen();
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    let dials = 0;
    const withTalos = async (): Promise<never> => {
      dials++;
      throw refusedTls();
    };
    const access = { withTalos } as unknown as ClusterAccess;
    const reopen = setTimeout(() => void listen(port), 100);
    const timings = { callDeadlineMs: 100, readyTimeoutMs: 700, pollMs: 50 };
    await expect(waitForMtls(access, `127.0.0.1:${port}`, timings, new AbortController().signal, { rebooting: true })).rejects.toThrow(/did not answer over mTLS/);
    clearTimeout(reopen);
    // About 600 ms up at one probe per 50 ms poll: a dozen. Probing again at once after each
    // failure made thousands.
    expect(dials).toBeGreaterThan(1);
    expect(dials).toBeLessThanOrEqual(16);
  });

  it('ends the wait at once on a failure that is not the node\'s answer', async () => {
    const port = await listen();
    let dials = 0;
    const withTalos = async (): Promise<never> => {
      dials++;
      throw new Error('cannot mint the admin certificate: the sealed key does not open');
    };
    const timings = { callDeadlineMs: 100, readyTimeoutMs: 5_000, pollMs: 20 };
    await expect(waitForMtls({ withTalos } as unknown as ClusterAccess, `127.0.0.1:${port}`, timings, new AbortController().signal)).rejects.toThrow(/cannot mint/);
    expect(dials).toBe(1);
  });
});
