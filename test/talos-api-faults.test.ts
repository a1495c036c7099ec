import { describe, expect, it } from 'vitest';
import { createTalosClient, TalosApiError } from '../lib/talos/api/index.ts';
import { startSimNode } from './sim/talos/index.ts';
import { closeAfterEach, configuredNode, expectRejection } from './talos-api-helpers.ts';

const track = closeAfterEach();

async function failure(p: Promise<unknown>): Promise<TalosApiError> {
  const err = await expectRejection(p);
  expect(err).toBeInstanceOf(TalosApiError);
  return err as TalosApiError;
}

describe('Talos API client failures name the node and the cause', () => {
  it('unreachable: nothing listens on the port', async () => {
    const sim = await startSimNode();
    const address = sim.address;
    await sim.stop();
    const client = track(createTalosClient({ mode: 'maintenance', address }));
    const err = await failure(client.version({ deadlineMs: 3000 }));
    expect(err.code).toBe('unreachable');
    expect(err.grpcStatus).toBe('UNAVAILABLE');
    expect(err.node).toBe(address);
    expect(err.message).toContain(address);
    expect(err.transient).toBe(true);
  });

  it('unreachable while refusing, reachable again after restore', async () => {
    const sim = track(await startSimNode());
    const client = track(createTalosClient({ mode: 'maintenance', address: sim.address }));
    await sim.refuse();
    expect((await failure(client.version({ deadlineMs: 3000 }))).code).toBe('unreachable');
    await sim.restore();
    const { eventually } = await import('./talos-api-helpers.ts');
    expect((await eventually(() => client.version({ deadlineMs: 1000 }))).tag).toBe('v1.13.9');
  });

  it('deadline: a blackholed node accepts TCP but never answers', async () => {
    const sim = track(await startSimNode());
    sim.blackhole(true);
    const client = track(createTalosClient({ mode: 'maintenance', address: sim.address }));
    const err = await failure(client.version({ deadlineMs: 300 }));
    expect(err.code).toBe('deadline');
    expect(err.grpcStatus).toBe('DEADLINE_EXCEEDED');
    expect(err.message).toContain(sim.address);
    expect(sim.calls).toHaveLength(0);
  });

  it('deadline: an established connection that stops answering', async () => {
    const { sim, client } = await configuredNode();
    track(sim);
    track(client);
    expect(await client.hostname()).toBe('cp-1');
    sim.blackhole(true);
    expect((await failure(client.hostname({ deadlineMs: 300 }))).code).toBe('deadline');
    sim.blackhole(false);
    expect(await client.hostname()).toBe('cp-1');
  });

  it('deadline: latency beyond the deadline; fine within it', async () => {
    const { sim, client } = await configuredNode();
    track(sim);
    track(client);
    sim.setLatency(400);
    expect((await failure(client.loadAvg({ deadlineMs: 100 }))).code).toBe('deadline');
    sim.setLatency(20);
    expect((await client.loadAvg({ deadlineMs: 3000 })).load5).toBeGreaterThan(0);
  });

  it('connection-lost: the node drops the connection mid-call', async () => {
    const { sim, client } = await configuredNode();
    track(sim);
    track(client);
    expect(await client.hostname()).toBe('cp-1');
    sim.dropConnectionsMidCall(true);
    const err = await failure(client.memory({ deadlineMs: 3000 }));
    expect(err.code).toBe('connection-lost');
    expect(err.grpcStatus).toBe('UNAVAILABLE');
    expect(err.message).toContain(sim.address);
    expect(sim.calls.at(-1)?.method).toBe('Memory');
  });

  it('canceled: an AbortSignal ends the call', async () => {
    const { sim, client } = await configuredNode();
    track(sim);
    track(client);
    sim.setLatency(5_000);
    const ac = new AbortController();
    const pending = client.systemStat({ signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    expect((await failure(pending)).code).toBe('canceled');
    const already = new AbortController();
    already.abort();
    expect((await failure(client.systemStat({ signal: already.signal }))).code).toBe('canceled');
  });

  it('node-error: a per-node metadata.error inside a successful reply', async () => {
    const { sim, client } = await configuredNode();
    track(sim);
    track(client);
    sim.perNodeError('ServiceList', 'rpc error: code = Unavailable desc = machined is restarting');
    const err = await failure(client.serviceList());
    expect(err.code).toBe('node-error');
    expect(err.message).toContain('machined is restarting');
    expect(err.message).toContain(sim.address);
    expect(err.grpcStatus).toBe('UNKNOWN');
    sim.perNodeError('ServiceList', null);
    expect((await client.serviceList()).length).toBeGreaterThan(3);
  });

  it('never puts config bytes or key material in error messages', async () => {
    const sim = track(await startSimNode());
    const client = track(createTalosClient({ mode: 'maintenance', address: sim.address }));
    const secret = Buffer.from('-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA\n-----END PRIVATE KEY-----').toString('base64');
    const config = `version: v1alpha1\nmachine:\n  ca: {crt: ${secret}, key: ${secret}\n  bad: [\n`;
    const err = await failure(client.applyConfiguration({ data: Buffer.from(config), mode: 'auto' }));
    expect(err.code).toBe('invalid-argument');
    expect(sim.receivedConfigs[0]?.data.toString()).toBe(config);
    expect(err.message).not.toContain(secret.slice(0, 40));
    expect(err.message).not.toContain('PRIVATE KEY');
  });
});
