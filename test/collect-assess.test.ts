import { describe, expect, it } from 'vitest';
import { assessCluster, formatDuration } from '../runner/jobs/collect/assess.ts';
import type { ClusterInput, MachineInput, TalosReport } from '../functions/collect/types.ts';
import type { KubeNode, KubeSnapshot } from '../lib/kube/types.ts';

const NOW = Date.parse('2026-08-21T12:00:00Z');
const CPS = ['cp1', 'cp2', 'cp3'];

function talos(name: string, role: 'controlplane' | 'worker'): TalosReport {
  const services = [
    { id: 'apid', state: 'Running', health: { healthy: true, unknown: false } },
    { id: 'kubelet', state: 'Running', health: { healthy: true, unknown: false } },
    { id: 'containerd', state: 'Running', health: { healthy: true } },
    { id: 'machined', state: 'Running', health: { unknown: true } },
  ];
  if (role === 'controlplane') services.push({ id: 'etcd', state: 'Running', health: { healthy: true, unknown: false } });
  return {
    version: { tag: 'v1.13.9' },
    services,
    memory: { memtotal: 8_000_000, memavailable: '6000000' },
    loadavg: { load1: 0.5, load5: 0.4, load15: 0.3 },
    systemStat: { cpuTotal: { user: 150, system: 50, idle: 700, iowait: 100 }, cpu: [{ user: 1, system: 1, idle: 1 }, { user: 1, system: 1, idle: 1 }] },
    diskStats: { total: { name: 'total', readSectors: 1000, writeSectors: '2000' } },
    mounts: [{ filesystem: '/dev/sda6', size: 100_000, available: 40_000, mountedOn: '/var' }],
    ...(role === 'controlplane'
      ? { etcd: { members: CPS.map((h, i) => ({ id: String(1000 + i), hostname: h })), status: { memberId: String(1000 + CPS.indexOf(name)), dbSize: 4096, errors: [] } } }
      : {}),
  };
}

function node(name: string, over: Partial<KubeNode> = {}): KubeNode {
  return {
    name,
    ready: 'True',
    readySince: '2026-08-01T00:00:00.000Z',
    kubeletVersion: 'v1.36.3',
    addresses: [],
    unschedulable: false,
    roles: name.startsWith('cp') ? ['control-plane'] : [],
    pressure: [],
    capacity: null,
    ...over,
  };
}

function snapshot(nodes: KubeNode[] = [...CPS, 'w1'].map((n) => node(n))): KubeSnapshot {
  return {
    server: 'https://192.0.2.1:6443',
    collectedAt: new Date(NOW).toISOString(),
    version: { gitVersion: 'v1.36.3', major: '1', minor: '36', platform: 'linux/amd64' },
    readyz: { ok: true, failing: [] },
    nodes,
    metrics: [{ name: 'w1', cpuCores: 0.25, memoryBytes: 1_073_741_824, timestamp: null }],
  };
}

function machines(): MachineInput[] {
  return [
    ...CPS.map((n) => ({ id: `m-${n}`, name: n, role: 'controlplane' as const, talos: talos(n, 'controlplane') })),
    { id: 'm-w1', name: 'w1', role: 'worker' as const, talos: talos('w1', 'worker') },
  ];
}

function cluster(over: Partial<ClusterInput> = {}): ClusterInput {
  return { machines: machines(), kube: snapshot(), now: NOW, expected: { talosVersion: 'v1.13.9', kubernetesVersion: 'v1.36.3' }, ...over };
}

const machine = (c: ReturnType<typeof assessCluster>, name: string) => c.machines.find((m) => m.name === name)!;

describe('assessCluster', () => {
  it('a healthy cluster has no reasons and versions filled in', () => {
    const a = assessCluster(cluster());
    expect(a.reasons).toEqual([]);
    expect(a.state).toBe('healthy');
    expect(a.kubernetesVersion).toBe('v1.36.3');
    expect(a.talosVersions).toEqual(['v1.13.9']);
    expect(a.etcd).toEqual({ expected: 3, members: 3, healthy: 3, learners: 0 });
    for (const m of a.machines) {
      expect(m.state).toBe('healthy');
      expect(m.talosVersion).toBe('v1.13.9');
      expect(m.kubernetesVersion).toBe('v1.36.3');
    }
  });

  it('emits compact numeric samples per machine', () => {
    const input = cluster();
    input.machines[3]!.previousCpu = { user: 100, system: 40, idle: 600, iowait: 60 };
    const w1 = machine(assessCluster(input), 'w1');
    const s = Object.fromEntries(w1.samples.map((x) => [x.metric, x.value]));
    expect(s['talos.up']).toBe(1);
    expect(s['memory.total_bytes']).toBe(8_000_000 * 1024);
    expect(s['memory.used_bytes']).toBe(2_000_000 * 1024);
    expect(s['load.1']).toBe(0.5);
    expect(s['cpu.count']).toBe(2);
    // busy 200-140=60 of total 1000-800=200 seconds
    expect(s['cpu.utilization']).toBeCloseTo(0.3, 9);
    expect(s['disk.read_bytes_total']).toBe(512_000);
    expect(s['disk.write_bytes_total']).toBe(1_024_000);
    expect(s['disk.var.used_bytes']).toBe(60_000);
    expect(s['kube.ready']).toBe(1);
    expect(s['kube.cpu_cores']).toBe(0.25);
    expect(s['kube.memory_bytes']).toBe(1_073_741_824);
    expect(machine(assessCluster(input), 'cp1').samples).toContainEqual({ metric: 'etcd.db_size_bytes', value: 4096 });
  });

  it('a missing etcd member degrades the cluster: "etcd has 2/3 members"', () => {
    const input = cluster();
    for (const m of input.machines) {
      if (m.role !== 'controlplane' || 'error' in m.talos) continue;
      const etcd = m.talos.etcd;
      if (etcd && !('error' in etcd)) etcd.members = etcd.members.filter((x) => x.hostname !== 'cp3');
    }
    const a = assessCluster(input);
    expect(a.state).toBe('degraded');
    expect(a.reasons).toContain('etcd has 2/3 members');
    expect(a.etcd?.members).toBe(2);
  });

  it('an unreachable machine is unreachable, and etcd loses its healthy member', () => {
    const input = cluster();
    input.machines[2]!.talos = { error: { code: 'unreachable', message: 'connect ECONNREFUSED 192.0.2.13:50000' } };
    const a = assessCluster(input);
    const cp3 = machine(a, 'cp3');
    expect(cp3.state).toBe('unreachable');
    expect(cp3.talosVersion).toBeNull();
    expect(cp3.samples).toContainEqual({ metric: 'talos.up', value: 0 });
    expect(a.state).toBe('degraded');
    expect(a.reasons).toContain('cp3: Talos API unreachable: connect ECONNREFUSED 192.0.2.13:50000');
    expect(a.reasons).toContain('etcd has 2/3 healthy members');
    expect(a.reasons.some((r) => r.includes('quorum'))).toBe(false);
  });

  it('two of three etcd members down is a lost quorum', () => {
    const input = cluster();
    input.machines[1]!.talos = { error: { code: 'deadline', message: 'deadline exceeded' } };
    input.machines[2]!.talos = { error: { code: 'deadline', message: 'deadline exceeded' } };
    const a = assessCluster(input);
    expect(a.reasons).toContain('etcd has 1/3 healthy members');
    expect(a.reasons.some((r) => r.startsWith('etcd has lost quorum'))).toBe(true);
  });

  it('a refused Talos API makes the machine unknown, not unreachable', () => {
    const input = cluster();
    input.machines[3]!.talos = { error: { code: 'unauthenticated', message: 'bad certificate' } };
    const w1 = machine(assessCluster(input), 'w1');
    expect(w1.state).toBe('unknown');
    expect(w1.reasons[0]).toBe('Talos API refused access: bad certificate');
  });

  it('a NotReady node is reported with how long', () => {
    const input = cluster({
      kube: snapshot([...CPS.map((n) => node(n)), node('w1', { ready: 'False', readySince: new Date(NOW - 5 * 60_000 - 10_000).toISOString() })]),
    });
    const a = assessCluster(input);
    expect(a.state).toBe('degraded');
    expect(a.reasons).toContain('node w1 NotReady for 5m');
    // phrased once at cluster level, not again under the machine
    expect(a.reasons.filter((r) => r.includes('NotReady'))).toHaveLength(1);
    const w1 = machine(a, 'w1');
    expect(w1.state).toBe('degraded');
    expect(w1.reasons).toContain('Kubernetes node NotReady for 5m');
    expect(w1.samples).toContainEqual({ metric: 'kube.ready', value: 0 });
  });

  it('Kubernetes API down: cluster degraded while Talos answers, unreachable when nothing does', () => {
    const down = { error: { code: 'unreachable', message: 'GET https://192.0.2.1:6443/version: ECONNREFUSED' } };
    const a = assessCluster(cluster({ kube: down }));
    expect(a.state).toBe('degraded');
    expect(a.reasons[0]).toBe('Kubernetes API unreachable: GET https://192.0.2.1:6443/version: ECONNREFUSED');
    expect(a.kubernetesVersion).toBeNull();
    // The machines themselves are fine as far as Talos can tell.
    expect(a.machines.every((m) => m.state === 'healthy')).toBe(true);

    const input = cluster({ kube: down });
    for (const m of input.machines) m.talos = { error: { code: 'unreachable', message: 'no route' } };
    expect(assessCluster(input).state).toBe('unreachable');
  });

  it('readyz failures are named', () => {
    const snap = snapshot();
    snap.readyz = { ok: false, failing: ['etcd'] };
    const a = assessCluster(cluster({ kube: snap }));
    expect(a.state).toBe('degraded');
    expect(a.reasons).toContain('readyz failing: etcd');
  });

  it('unhealthy or missing services and version drift are machine reasons', () => {
    const input = cluster();
    const cp1 = input.machines[0]!.talos as TalosReport;
    cp1.services = cp1.services.filter((s) => s.id !== 'kubelet');
    const etcd = cp1.services.find((s) => s.id === 'etcd')!;
    etcd.health = { healthy: false, unknown: false, lastMessage: 'context deadline exceeded' };
    const w1 = input.machines[3]!.talos as TalosReport;
    w1.version = { tag: 'v1.12.11' };
    w1.services.find((s) => s.id === 'containerd')!.state = 'Failed';
    input.kube = snapshot([...CPS.map((n) => node(n)), node('w1', { kubeletVersion: 'v1.35.2' })]);
    const a = assessCluster(input);
    expect(machine(a, 'cp1').reasons).toEqual(['service kubelet missing', 'service etcd unhealthy: context deadline exceeded']);
    expect(machine(a, 'w1').reasons).toEqual(['service containerd is Failed', 'Talos v1.12.11, expected v1.13.9', 'kubelet v1.35.2, expected v1.36.3']);
    expect(a.reasons).toContain('w1: Talos v1.12.11, expected v1.13.9');
    expect(a.reasons).toContain('etcd has 2/3 healthy members');
    expect(a.talosVersions).toEqual(['v1.12.11', 'v1.13.9']);
  });

  it('a machine Kubernetes does not know is degraded', () => {
    const a = assessCluster(cluster({ kube: snapshot(CPS.map((n) => node(n))) }));
    expect(machine(a, 'w1').reasons).toEqual(['not registered as a Kubernetes node']);
    expect(a.state).toBe('degraded');
  });

  it('no machines is unknown', () => {
    expect(assessCluster(cluster({ machines: [], kube: { error: { code: 'unreachable', message: 'x' } } })).state).toBe('unknown');
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [45_000, '45s'],
    [5 * 60_000 + 59_000, '5m'],
    [2 * 3600_000, '2h'],
    [2 * 3600_000 + 5 * 60_000, '2h5m'],
    [3 * 86400_000 + 4 * 3600_000, '3d4h'],
    [-1000, '0s'],
  ])('%d ms → %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});
