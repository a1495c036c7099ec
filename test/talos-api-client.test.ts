import { X509Certificate, createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createTalosClient, isTalosApiError, TalosApiError } from '../lib/talos/api/index.ts';
import {
  createTestOsCa, issueTestClientCert, startSimNode, testMachineConfig, toTalosKeyLabel,
} from './sim/talos/index.ts';
import { closeAfterEach, configuredNode, eventually, expectRejection } from './talos-api-helpers.ts';

const track = closeAfterEach();

function asTalosError(err: unknown): TalosApiError {
  expect(err).toBeInstanceOf(TalosApiError);
  return err as TalosApiError;
}

describe('maintenance mode to configured mode', () => {
  it.each(['127.0.0.1', '::1'] as const)('applies a config over pinned TLS and then talks mTLS (%s)', async (host) => {
    const sim = track(await startSimNode({ host, rebootMs: 30 }));
    const ca = await createTestOsCa();
    const config = Buffer.from(testMachineConfig({ ca, hostname: 'cp-1' }));
    const maint = track(createTalosClient({ mode: 'maintenance', address: sim.address, fingerprint: sim.maintenanceFingerprint }));

    expect((await maint.version()).tag).toBe('v1.13.9');
    const applied = await maint.applyConfiguration({ data: config, mode: 'auto' });
    expect(applied.mode).toBe('auto');
    expect(sim.receivedConfigs).toHaveLength(1);
    expect(sim.receivedConfigs[0]?.data.equals(config)).toBe(true);
    expect(sim.receivedConfigs[0]?.mode).toBe('AUTO');

    await sim.waitForPhase('configured');
    const admin = await issueTestClientCert(ca);
    const client = track(createTalosClient({ mode: 'configured', address: sim.address, ca: ca.certPem, cert: admin.certPem, key: admin.keyPem }));
    expect(await eventually(() => client.hostname())).toBe('cp-1');

    const services = await client.serviceList();
    expect(services.map((s) => s.id)).toEqual(expect.arrayContaining(['apid', 'etcd', 'kubelet', 'machined', 'trustd']));
    expect(services.find((s) => s.id === 'etcd')?.health?.healthy).toBe(false);
    expect(services.find((s) => s.id === 'apid')).toMatchObject({ state: 'Running', health: { healthy: true } });

    const mem = await client.memory();
    expect(mem.memtotal).toBeGreaterThan(mem.memavailable);
    expect(mem.memavailable).toBeGreaterThan(0);
    const load = await client.loadAvg();
    expect(load.load1).toBeGreaterThan(0);
    const stat = await client.systemStat();
    expect(stat.cpu.length).toBeGreaterThan(0);
    expect(stat.cpuTotal?.idle).toBeGreaterThan(0);
    expect(stat.bootTime).toBeGreaterThan(1_600_000_000);
    const disks = await client.diskStats();
    expect(disks.devices.map((d) => d.name)).toContain('sda');
    expect(disks.total?.writeSectors).toBeGreaterThan(0);
  });

  it('accepts the pin in hex, and a talosctl-style ED25519 PRIVATE KEY label', async () => {
    const sim = track(await startSimNode({ rebootMs: 20, uniqueMaintenanceCert: true }));
    const hex = Buffer.from(sim.maintenanceFingerprint, 'base64').toString('hex').toUpperCase().match(/../g)!.join(':');
    const maint = track(createTalosClient({ mode: 'maintenance', address: sim.address, fingerprint: hex }));
    const ca = await createTestOsCa();
    await maint.applyConfiguration({ data: Buffer.from(testMachineConfig({ ca })), mode: 'reboot' });
    await sim.waitForPhase('configured');
    const admin = await issueTestClientCert(ca);
    const client = track(createTalosClient({ mode: 'configured', address: sim.address, ca: ca.certPem, cert: admin.certPem, key: toTalosKeyLabel(admin.keyPem) }));
    expect((await eventually(() => client.version())).tag).toBe('v1.13.9');
  });

  it('refuses a node whose certificate does not match the pin before sending anything', async () => {
    const sim = track(await startSimNode({ uniqueMaintenanceCert: true }));
    const other = createHash('sha256').update('some other key').digest('base64');
    const maint = track(createTalosClient({ mode: 'maintenance', address: sim.address, fingerprint: other }));
    const err = asTalosError(await expectRejection(maint.applyConfiguration({ data: Buffer.from('version: v1alpha1\n'), mode: 'auto' })));
    expect(err.code).toBe('fingerprint-mismatch');
    expect(err.node).toBe(sim.address);
    expect(err.message).toContain(sim.address);
    expect(sim.receivedConfigs).toHaveLength(0);
    expect(sim.calls).toHaveLength(0);
    expect(sim.phase).toBe('maintenance');
  });

  it('also pins against the whole-certificate SHA-256 (openssl -fingerprint form)', async () => {
    const sim = track(await startSimNode({ uniqueMaintenanceCert: true }));
    const der = new X509Certificate(sim.maintenanceCert.certPem).raw;
    const certHex = createHash('sha256').update(der).digest('hex');
    const maint = track(createTalosClient({ mode: 'maintenance', address: sim.address, fingerprint: certHex }));
    expect((await maint.version()).tag).toBe('v1.13.9');
  });

  it('rejects unsupported calls in maintenance like apid does', async () => {
    const sim = track(await startSimNode());
    const maint = track(createTalosClient({ mode: 'maintenance', address: sim.address }));
    expect(asTalosError(await expectRejection(maint.bootstrap())).code).toBe('permission-denied');
    expect(asTalosError(await expectRejection(maint.legacyUpgrade({ image: 'ghcr.io/siderolabs/installer:v1.13.9' }))).code).toBe('permission-denied');
    expect(await maint.hostname()).toMatch(/^talos-/);

    const old = track(await startSimNode({ version: 'v1.12.11' }));
    const oldMaint = track(createTalosClient({ mode: 'maintenance', address: old.address }));
    expect(asTalosError(await expectRejection(oldMaint.version())).code).toBe('unimplemented');
    const staged = asTalosError(await expectRejection(oldMaint.applyConfiguration({ data: Buffer.from('x: 1\n'), mode: 'staged' })));
    expect(staged.code).toBe('unimplemented');
  });

  it('dry-run and staged applies keep the node in maintenance', async () => {
    const sim = track(await startSimNode({ rebootMs: 20 }));
    const ca = await createTestOsCa();
    const data = Buffer.from(testMachineConfig({ ca }));
    const maint = track(createTalosClient({ mode: 'maintenance', address: sim.address }));
    const dry = await maint.applyConfiguration({ data, mode: 'auto', dryRun: true });
    expect(dry.modeDetails).toMatch(/Dry run/);
    await maint.applyConfiguration({ data, mode: 'try', tryModeTimeoutMs: 90_500 });
    expect(sim.receivedConfigs.map((r) => [r.mode, r.dryRun, r.tryModeTimeoutMs])).toEqual([
      ['AUTO', true, undefined],
      ['TRY', false, 90_500],
    ]);
    await sim.waitForPhase('configured');
  });

  it('reports a config without the OS CA as invalid-argument', async () => {
    const sim = track(await startSimNode());
    const maint = track(createTalosClient({ mode: 'maintenance', address: sim.address }));
    const err = asTalosError(await expectRejection(maint.applyConfiguration({ data: Buffer.from('version: v1alpha1\nmachine:\n  type: worker\n'), mode: 'auto' })));
    expect(err.code).toBe('invalid-argument');
    expect(sim.phase).toBe('maintenance');
  });
});

describe('configured mode mTLS', () => {
  it('refuses a server signed by a different CA', async () => {
    const { sim, admin } = await configuredNode();
    track(sim);
    const other = await createTestOsCa();
    const client = track(createTalosClient({ mode: 'configured', address: sim.address, ca: other.certPem, cert: admin.certPem, key: admin.keyPem }));
    const err = asTalosError(await expectRejection(client.version({ deadlineMs: 3000 })));
    expect(err.code).toBe('tls');
    expect(err.message).toContain(sim.address);
    expect(sim.calls).toHaveLength(0);
  });

  it('is refused with a client certificate from another CA', async () => {
    const { sim, ca } = await configuredNode();
    track(sim);
    const stranger = await issueTestClientCert(await createTestOsCa());
    const client = track(createTalosClient({ mode: 'configured', address: sim.address, ca: ca.certPem, cert: stranger.certPem, key: stranger.keyPem }));
    const err = asTalosError(await expectRejection(client.version({ deadlineMs: 3000 })));
    expect(err.code).toBe('tls');
    expect(sim.calls).toHaveLength(0);
    expect(sim.handshakes.rejected).toBeGreaterThan(0);
  });

  it('is refused with a client certificate that also allows serverAuth (apid wants clientAuth only)', async () => {
    const { sim, ca } = await configuredNode();
    track(sim);
    const both = await issueTestClientCert(ca, { usage: 'client+server' });
    const client = track(createTalosClient({ mode: 'configured', address: sim.address, ca: ca.certPem, cert: both.certPem, key: both.keyPem }));
    const err = asTalosError(await expectRejection(client.version({ deadlineMs: 3000 })));
    expect(err.code).toBe('tls');
    expect(sim.calls).toHaveLength(0);
  });

  it('enforces roles from the certificate organization', async () => {
    const { sim, ca, client: admin } = await configuredNode();
    track(sim);
    track(admin);
    const readerPair = await issueTestClientCert(ca, { roles: ['os:reader'] });
    const reader = track(createTalosClient({ mode: 'configured', address: sim.address, ca: ca.certPem, cert: readerPair.certPem, key: readerPair.keyPem }));
    expect((await reader.version()).tag).toBe('v1.13.9');
    const denied = asTalosError(await expectRejection(reader.applyConfiguration({ data: Buffer.from(testMachineConfig({ ca })), mode: 'auto' })));
    expect(denied.code).toBe('permission-denied');
    expect(asTalosError(await expectRejection(reader.reboot())).code).toBe('permission-denied');
    expect(sim.receivedConfigs).toHaveLength(0);
    expect(sim.reboots).toHaveLength(0);

    const noRole = await issueTestClientCert(ca, { roles: [] });
    const nobody = track(createTalosClient({ mode: 'configured', address: sim.address, ca: ca.certPem, cert: noRole.certPem, key: noRole.keyPem }));
    expect(asTalosError(await expectRejection(nobody.version())).code).toBe('permission-denied');

    const live = await admin.applyConfiguration({ data: Buffer.from(testMachineConfig({ ca, hostname: 'cp-renamed' })), mode: 'auto' });
    expect(live.mode).toBe('no-reboot');
    expect(await admin.hostname()).toBe('cp-renamed');
  });

  it('bootstraps once; a second bootstrap fails like upstream', async () => {
    const { sim, client } = await configuredNode();
    track(sim);
    track(client);
    await expect(client.etcdMemberList()).rejects.toSatisfy((e: unknown) => isTalosApiError(e, 'failed-precondition'));
    await client.bootstrap();
    const err = asTalosError(await expectRejection(client.bootstrap()));
    expect(err.code).toBe('already-exists');
    expect(err.grpcStatus).toBe('ALREADY_EXISTS');
    expect(sim.bootstrapCalls).toHaveLength(2);
    const members = await client.etcdMemberList();
    expect(members).toHaveLength(1);
    expect(members[0]?.hostname).toBe('cp-1');
    expect((await client.serviceList()).find((s) => s.id === 'etcd')?.health?.healthy).toBe(true);
  });

  it('returns configurable etcd members with exact uint64 ids and status errors', async () => {
    const { sim, client } = await configuredNode();
    track(sim);
    track(client);
    sim.setEtcdMembers([
      { id: '18446744073709551615', hostname: 'cp-1' },
      { id: '9007199254740993', hostname: 'cp-2', isLearner: true },
    ]);
    sim.setEtcdErrors(['NOSPACE']);
    const members = await client.etcdMemberList();
    expect(members.map((m) => [m.id, m.hostname, m.isLearner])).toEqual([
      ['18446744073709551615', 'cp-1', false],
      ['9007199254740993', 'cp-2', true],
    ]);
    const status = await client.etcdStatus();
    expect(status.memberId).toBe('18446744073709551615');
    expect(status.errors).toEqual(['NOSPACE']);
  });
});
