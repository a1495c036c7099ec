import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRejection } from './support/kube-errors.ts';
import { collectKubernetes } from '../lib/kube/collect.ts';
import { createTestCa, issueClientCert, type TestCa, type TestCert } from './sim/kube/certs.ts';
import { kubeconfigFor } from './sim/kube/kubeconfig.ts';
import { startKubeSim, type KubeSim } from './sim/kube/server.ts';

const DEADLINE = 5_000;


describe('collectKubernetes against the simulated API server', () => {
  let ca: TestCa;
  let admin: TestCert;
  let sim: KubeSim;

  beforeAll(async () => {
    ca = await createTestCa();
    admin = await issueClientCert(ca);
    sim = await startKubeSim({
      ca,
      gitVersion: 'v1.36.3',
      nodes: {
        cp1: { roles: ['control-plane'], addresses: [{ type: 'InternalIP', address: '192.0.2.10' }], capacity: { cpu: '4', memory: '8Gi' } },
        w1: { kubeletVersion: 'v1.36.3', usage: { cpu: '1500m', memory: '2Gi' } },
      },
    });
  });
  afterAll(async () => {
    await sim?.stop();
  });

  it('reads version, readyz, nodes; metrics null when the API is not installed', async () => {
    sim.setMetrics(false);
    const before = sim.requests.length;
    const snap = await collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: DEADLINE });
    expect(snap.server).toBe(sim.url);
    expect(snap.version.gitVersion).toBe('v1.36.3');
    expect(snap.version.minor).toBe('36');
    expect(snap.readyz).toEqual({ ok: true, failing: [] });
    expect(snap.nodes.map((n) => n.name)).toEqual(['cp1', 'w1']);
    const cp1 = snap.nodes[0]!;
    expect(cp1.ready).toBe('True');
    expect(cp1.roles).toEqual(['control-plane']);
    expect(cp1.addresses).toEqual([{ type: 'InternalIP', address: '192.0.2.10' }]);
    expect(cp1.capacity).toEqual({ cpuCores: 4, memoryBytes: 8 * 2 ** 30 });
    expect(cp1.unschedulable).toBe(false);
    expect(cp1.kubeletVersion).toBe('v1.36.3');
    expect(snap.metrics).toBeNull();
    expect(snap.metricsError).toBeUndefined();
    // Discovery said no metrics.k8s.io, so the collector must not have asked for it.
    expect(sim.requests.slice(before).some((p) => p.includes('metrics.k8s.io'))).toBe(false);
  });

  it('parses node metrics when metrics-server is present', async () => {
    sim.setMetrics(true);
    const snap = await collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: DEADLINE });
    expect(snap.metrics).not.toBeNull();
    const w1 = snap.metrics!.find((m) => m.name === 'w1');
    expect(w1?.cpuCores).toBeCloseTo(1.5, 9);
    expect(w1?.memoryBytes).toBe(2 * 2 ** 30);
    expect(snap.metrics!.find((m) => m.name === 'cp1')?.memoryBytes).toBe(1024 * 2 ** 20);
  });

  it('keeps the snapshot when metrics.k8s.io is registered but down', async () => {
    sim.setMetrics('unavailable');
    const snap = await collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: DEADLINE });
    expect(snap.metrics).toBeNull();
    expect(snap.metricsError).toMatch(/metrics\.k8s\.io.*503/);
    expect(snap.nodes).toHaveLength(2);
    sim.setMetrics(false);
  });

  it('reports a NotReady node with its transition time, and cordon and pressure', async () => {
    const since = '2026-08-20T10:00:00.000Z';
    sim.setNode('w1', { ready: false, lastTransitionTime: since, unschedulable: true, pressure: ['DiskPressure'] });
    try {
      const snap = await collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: DEADLINE });
      const w1 = snap.nodes.find((n) => n.name === 'w1')!;
      expect(w1.ready).toBe('False');
      expect(w1.readySince).toBe(since);
      expect(w1.unschedulable).toBe(true);
      expect(w1.pressure).toEqual(['DiskPressure']);
      expect(snap.nodes.find((n) => n.name === 'cp1')!.ready).toBe('True');
    } finally {
      sim.setNode('w1', { ready: true, unschedulable: false, pressure: [] });
    }
  });

  it('sees node removal', async () => {
    sim.setNode('w2', {});
    let snap = await collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: DEADLINE });
    expect(snap.nodes.map((n) => n.name)).toContain('w2');
    sim.removeNode('w2');
    snap = await collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: DEADLINE });
    expect(snap.nodes.map((n) => n.name)).not.toContain('w2');
  });

  it('reports failing readyz checks', async () => {
    sim.setReadyz(false, ['etcd', 'etcd-readiness']);
    try {
      const snap = await collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: DEADLINE });
      expect(snap.readyz).toEqual({ ok: false, failing: ['etcd', 'etcd-readiness'] });
    } finally {
      sim.setReadyz(true);
    }
  });

  it('a client certificate from another CA is unauthenticated', async () => {
    const other = await createTestCa('someone-else');
    const stranger = await issueClientCert(other);
    const err = await kubeRejection(collectKubernetes(kubeconfigFor(sim, stranger), { deadlineMs: DEADLINE }));
    expect(err.code).toBe('unauthenticated');
    expect(err.message).toContain(sim.url);
  });

  it('no client certificate at all is unauthenticated', async () => {
    const yaml = kubeconfigFor(sim, null);
    const err = await kubeRejection(collectKubernetes(yaml, { deadlineMs: DEADLINE }));
    expect(err.code).toBe('unauthenticated');
    expect(err.status).toBe(401);
  });

  it('a client outside system:masters is forbidden, naming the endpoint', async () => {
    const viewer = await issueClientCert(ca, { cn: 'viewer', org: 'viewers' });
    const err = await kubeRejection(collectKubernetes(kubeconfigFor(sim, viewer), { deadlineMs: DEADLINE }));
    expect(err.code).toBe('forbidden');
    expect(err.status).toBe(403);
    expect(err.message).toContain('/api/v1/nodes');
  });

  it('an untrusted server certificate is a TLS error', async () => {
    const other = await createTestCa('not-the-cluster');
    const yaml = kubeconfigFor({ url: sim.url, ca: other }, admin);
    const err = await kubeRejection(collectKubernetes(yaml, { deadlineMs: DEADLINE }));
    expect(err.code).toBe('tls');
  });

  it('never puts key material in the error', async () => {
    const other = await createTestCa('not-the-cluster');
    const err = await kubeRejection(collectKubernetes(kubeconfigFor({ url: sim.url, ca: other }, admin), { deadlineMs: DEADLINE }));
    const b64Key = Buffer.from(admin.keyPem).toString('base64');
    expect(err.message).not.toContain('PRIVATE KEY');
    expect(err.message).not.toContain(b64Key.slice(20, 60));
  });

  it('slow answers inside the budget still succeed', async () => {
    sim.setLatency(50);
    try {
      const snap = await collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: DEADLINE });
      expect(snap.nodes).toHaveLength(2);
    } finally {
      sim.setLatency(0);
    }
  });

  it('a caller abort ends the collection with code deadline', async () => {
    sim.blackhole(true);
    try {
      const ac = new AbortController();
      const p = collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: 60_000, signal: ac.signal });
      setTimeout(() => ac.abort(), 50);
      const err = await kubeRejection(p);
      expect(err.code).toBe('deadline');
      expect(err.message).toMatch(/aborted/);
    } finally {
      sim.blackhole(false);
    }
  });
});

describe('collectKubernetes against a black-holed server', () => {
  let sim: KubeSim;
  let admin: TestCert;
  beforeAll(async () => {
    const ca = await createTestCa();
    admin = await issueClientCert(ca);
    sim = await startKubeSim({ ca, host: '::1', nodes: { n1: {} } });
  });
  afterAll(async () => {
    await sim?.stop();
  });

  it('works over IPv6 loopback before the black hole', async () => {
    const snap = await collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: DEADLINE });
    expect(sim.url).toMatch(/^https:\/\/\[::1\]:\d+$/);
    expect(snap.nodes.map((n) => n.name)).toEqual(['n1']);
  });

  it('fails with code deadline instead of hanging', async () => {
    sim.blackhole(true);
    const err = await kubeRejection(collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: 300 }));
    expect(err.code).toBe('deadline');
    expect(err.message).toContain(sim.url);
    sim.blackhole(false);
  });

  it('a stopped server is unreachable', async () => {
    const yaml = kubeconfigFor(sim, admin);
    await sim.stop();
    const err = await kubeRejection(collectKubernetes(yaml, { deadlineMs: DEADLINE }));
    expect(err.code).toBe('unreachable');
  });
});
