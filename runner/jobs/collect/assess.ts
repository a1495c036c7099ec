// Pure health assessment for the collect pass: turns what was read from the Talos and Kubernetes
// APIs into a state and human-readable reasons per machine and per cluster, plus numeric samples.
// No I/O and no clock of its own: the same input always gives the same answer.
import type { KubeNode, KubeSnapshot } from '../../../lib/kube/types.ts';
import { compareReportedVersions, parseVersion } from '../../../lib/talos/versions.ts';
import type {
  CallError,
  ClusterAssessment,
  ClusterInput,
  EtcdSummary,
  Failed,
  HealthState,
  MachineAssessment,
  MachineInput,
  Sample,
  TalosCpuStat,
  TalosEtcd,
  TalosReport,
  TalosService,
  Uint64,
} from '../../../functions/collect/types.ts';

/** Error codes that mean "we were refused", not "nothing answered": health is then unknown. */
const REFUSED = new Set(['unauthenticated', 'forbidden', 'permission-denied', 'permission_denied', 'PERMISSION_DENIED', 'UNAUTHENTICATED']);
const SETTLED_STATES = new Set(['Running', 'Finished', 'Skipped']);
const MEMORY_LOW_RATIO = 0.05;
const VAR_FULL_RATIO = 0.9;

export const isFailed = <T extends object>(x: T | Failed): x is Failed => 'error' in x && typeof (x as Failed).error === 'object';

const num = (v: Uint64 | undefined): number => (v === undefined ? 0 : Number(v));

/** "45s", "5m", "2h5m", "3d4h": short and stable, for reasons shown to people. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h}h${m % 60}m` : `${h}h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d}d${h % 24}h` : `${d}d`;
}

function since(iso: string | null, now: number): string {
  if (!iso) return '';
  const t = Date.parse(iso);
  return Number.isNaN(t) ? '' : ` for ${formatDuration(now - t)}`;
}

const sameVersion = (a: string, b: string): boolean => compareReportedVersions(a, b) === 0 || a.replace(/^v/, '') === b.replace(/^v/, '');

function serviceProblem(s: TalosService): string | null {
  if (!SETTLED_STATES.has(s.state)) {
    const why = s.health?.lastMessage ? `: ${s.health.lastMessage}` : '';
    return `service ${s.id} is ${s.state}${why}`;
  }
  if (s.state === 'Running' && s.health && !s.health.unknown && s.health.healthy === false) {
    const why = s.health.lastMessage ? `: ${s.health.lastMessage}` : '';
    return `service ${s.id} unhealthy${why}`;
  }
  return null;
}

function expectedServices(m: MachineInput): string[] {
  return m.role === 'controlplane' ? ['kubelet', 'etcd'] : ['kubelet'];
}

function cpuBusyTotal(c: TalosCpuStat): { busy: number; total: number } {
  const idle = c.idle + (c.iowait ?? 0);
  const busy = c.user + (c.nice ?? 0) + c.system + (c.irq ?? 0) + (c.softIrq ?? 0) + (c.steal ?? 0);
  return { busy, total: busy + idle };
}

function talosSamples(m: MachineInput, t: TalosReport): Sample[] {
  const out: Sample[] = [];
  const add = (metric: string, value: number): void => {
    if (Number.isFinite(value)) out.push({ metric, value });
  };
  if (t.memory) {
    const total = num(t.memory.memtotal) * 1024;
    add('memory.total_bytes', total);
    add('memory.used_bytes', total - num(t.memory.memavailable) * 1024);
  }
  if (t.loadavg) {
    add('load.1', t.loadavg.load1);
    add('load.5', t.loadavg.load5);
    add('load.15', t.loadavg.load15);
  }
  if (t.systemStat) {
    if (t.systemStat.cpu?.length) add('cpu.count', t.systemStat.cpu.length);
    if (m.previousCpu) {
      const now = cpuBusyTotal(t.systemStat.cpuTotal);
      const before = cpuBusyTotal(m.previousCpu);
      const dTotal = now.total - before.total;
      // A reboot resets the counters; a negative delta is not a utilisation.
      if (dTotal > 0 && now.busy >= before.busy) add('cpu.utilization', Math.min(1, (now.busy - before.busy) / dTotal));
    }
  }
  if (t.diskStats) {
    const disks = t.diskStats.total ? [t.diskStats.total] : (t.diskStats.devices ?? []);
    if (disks.length) {
      add('disk.read_bytes_total', disks.reduce((a, d) => a + num(d.readSectors) * 512, 0));
      add('disk.write_bytes_total', disks.reduce((a, d) => a + num(d.writeSectors) * 512, 0));
    }
  }
  const varMount = t.mounts?.find((x) => x.mountedOn === '/var');
  if (varMount) {
    add('disk.var.size_bytes', num(varMount.size));
    add('disk.var.used_bytes', num(varMount.size) - num(varMount.available));
  }
  if (t.etcd && !isFailed(t.etcd) && t.etcd.status?.dbSize !== undefined) add('etcd.db_size_bytes', num(t.etcd.status.dbSize));
  return out;
}

function talosReasons(m: MachineInput, t: TalosReport, expectedTalos: string | undefined): string[] {
  const reasons: string[] = [];
  const byId = new Map(t.services.map((s) => [s.id, s]));
  for (const id of expectedServices(m)) if (!byId.has(id)) reasons.push(`service ${id} missing`);
  for (const s of t.services) {
    const p = serviceProblem(s);
    if (p) reasons.push(p);
  }
  if (expectedTalos && t.version.tag && !sameVersion(t.version.tag, expectedTalos)) {
    reasons.push(`Talos ${t.version.tag}, expected ${expectedTalos}`);
  }
  if (t.memory && num(t.memory.memtotal) > 0) {
    const ratio = num(t.memory.memavailable) / num(t.memory.memtotal);
    if (ratio < MEMORY_LOW_RATIO) reasons.push(`memory low: ${Math.round(ratio * 100)}% available`);
  }
  const varMount = t.mounts?.find((x) => x.mountedOn === '/var');
  if (varMount && num(varMount.size) > 0) {
    const used = 1 - num(varMount.available) / num(varMount.size);
    if (used > VAR_FULL_RATIO) reasons.push(`/var ${Math.round(used * 100)}% full`);
  }
  if (m.role === 'controlplane' && t.etcd) {
    if (isFailed(t.etcd)) reasons.push(`etcd status unavailable: ${t.etcd.error.message}`);
    else for (const e of t.etcd.status?.errors ?? []) reasons.push(`etcd reports: ${e}`);
  }
  return reasons;
}

function kubeletReason(node: KubeNode, kube: KubeSnapshot, expected: string | undefined): string | null {
  const kubelet = node.kubeletVersion;
  if (!kubelet) return null;
  if (expected) return sameVersion(kubelet, expected) ? null : `kubelet ${kubelet}, expected ${expected}`;
  const api = kube.version.gitVersion;
  const cmp = compareReportedVersions(kubelet, api);
  if (cmp !== undefined && cmp > 0) return `kubelet ${kubelet} is newer than the API server ${api}`;
  const k = parseVersion(kubelet);
  const a = parseVersion(api);
  // Kubernetes supports kubelets up to three minor versions behind the API server.
  if (k && a && k.major === a.major && a.minor - k.minor > 3) return `kubelet ${kubelet} is too far behind the API server ${api}`;
  return null;
}

/** Node readiness phrased for a machine ("Kubernetes node NotReady for 5m"); null when Ready. */
function readinessText(node: KubeNode, now: number): string | null {
  if (node.ready === 'True') return null;
  return node.ready === 'False' ? `NotReady${since(node.readySince, now)}` : `Ready status Unknown${since(node.readySince, now)}`;
}

/** A cordoned node's reason; an upgrade excuses it for a node someone else cordoned (see upgrade/drain.ts). */
export const CORDONED_REASON = 'Kubernetes node cordoned (unschedulable)';

function kubeNodeReasons(node: KubeNode | undefined, kube: KubeSnapshot, expectedK8s: string | undefined, now: number): string[] {
  if (!node) return ['not registered as a Kubernetes node'];
  const reasons: string[] = [];
  const r = readinessText(node, now);
  if (r) reasons.push(`Kubernetes node ${r}`);
  if (node.unschedulable) reasons.push(CORDONED_REASON);
  for (const p of node.pressure) reasons.push(`Kubernetes node has ${p}`);
  const kv = kubeletReason(node, kube, expectedK8s);
  if (kv) reasons.push(kv);
  return reasons;
}

function kubeSamples(node: KubeNode | undefined, kube: KubeSnapshot): Sample[] {
  if (!node) return [];
  const out: Sample[] = [{ metric: 'kube.ready', value: node.ready === 'True' ? 1 : 0 }];
  const usage = kube.metrics?.find((x) => x.name === node.name);
  if (usage) {
    out.push({ metric: 'kube.cpu_cores', value: usage.cpuCores });
    out.push({ metric: 'kube.memory_bytes', value: usage.memoryBytes });
  }
  return out;
}

function talosErrorReason(e: CallError): string {
  return REFUSED.has(e.code) ? `Talos API refused access: ${e.message}` : `Talos API unreachable: ${e.message}`;
}

export function assessMachine(m: MachineInput, kube: KubeSnapshot | Failed, input: Pick<ClusterInput, 'expected' | 'now'>): MachineAssessment {
  const now = typeof input.now === 'number' ? input.now : input.now.getTime();
  const snapshot = isFailed(kube) ? null : kube;
  const node = snapshot?.nodes.find((n) => n.name === m.name);
  const reasons: string[] = [];
  const samples: Sample[] = [];
  let state: HealthState;
  let talosVersion: string | null = null;

  if (isFailed(m.talos)) {
    state = REFUSED.has(m.talos.error.code) ? 'unknown' : 'unreachable';
    reasons.push(talosErrorReason(m.talos.error));
    samples.push({ metric: 'talos.up', value: 0 });
  } else {
    talosVersion = m.talos.version.tag || null;
    reasons.push(...talosReasons(m, m.talos, input.expected?.talosVersion));
    samples.push({ metric: 'talos.up', value: 1 }, ...talosSamples(m, m.talos));
    state = 'healthy';
  }
  if (snapshot) {
    reasons.push(...kubeNodeReasons(node, snapshot, input.expected?.kubernetesVersion, now));
    samples.push(...kubeSamples(node, snapshot));
  }
  if (state === 'healthy' && reasons.length > 0) state = 'degraded';
  return {
    id: m.id,
    name: m.name,
    role: m.role,
    state,
    reasons,
    talosVersion,
    kubernetesVersion: node?.kubeletVersion || null,
    samples,
  };
}

function etcdOf(m: MachineInput): TalosEtcd | null {
  if (isFailed(m.talos) || !m.talos.etcd || isFailed(m.talos.etcd)) return null;
  return m.talos.etcd;
}

function etcdServiceHealthy(m: MachineInput): boolean {
  if (isFailed(m.talos)) return false;
  const s = m.talos.services.find((x) => x.id === 'etcd');
  const e = etcdOf(m);
  return !!s && serviceProblem(s) === null && s.state === 'Running' && !!e && (e.status?.errors ?? []).length === 0;
}

function assessEtcd(machines: MachineInput[]): { summary: EtcdSummary | null; reasons: string[] } {
  const cps = machines.filter((m) => m.role === 'controlplane');
  if (cps.length === 0) return { summary: null, reasons: [] };
  const lists = cps.map(etcdOf).filter((e): e is TalosEtcd => e !== null);
  if (lists.length === 0) {
    return { summary: { expected: cps.length, members: null, healthy: 0, learners: 0 }, reasons: ['etcd member list unavailable on every control plane'] };
  }
  const reasons: string[] = [];
  const key = (e: TalosEtcd): string => e.members.map((x) => String(x.id)).sort().join(',');
  // Omni's rule: every control plane must see the same membership.
  if (new Set(lists.map(key)).size > 1) reasons.push('etcd member lists disagree between control planes');
  const members = lists[0]!.members;
  const voting = members.filter((x) => !x.isLearner);
  const learners = members.length - voting.length;
  if (voting.length !== cps.length) reasons.push(`etcd has ${voting.length}/${cps.length} members`);
  for (const l of members.filter((x) => x.isLearner)) reasons.push(`etcd member ${l.hostname || String(l.id)} is still a learner`);
  const byName = new Map(cps.map((m) => [m.name, m]));
  const healthy = voting.filter((x) => {
    const m = byName.get(x.hostname);
    return m !== undefined && etcdServiceHealthy(m);
  }).length;
  if (healthy < voting.length) reasons.push(`etcd has ${healthy}/${voting.length} healthy members`);
  const quorum = Math.floor(voting.length / 2) + 1;
  if (voting.length > 0 && healthy < quorum) reasons.push(`etcd has lost quorum (needs ${quorum} healthy members)`);
  return { summary: { expected: cps.length, members: voting.length, healthy, learners }, reasons };
}

function kubeReasons(kube: KubeSnapshot | Failed, now: number): string[] {
  if (isFailed(kube)) {
    return [REFUSED.has(kube.error.code) ? `Kubernetes API refused credentials: ${kube.error.message}` : `Kubernetes API unreachable: ${kube.error.message}`];
  }
  const reasons: string[] = [];
  if (!kube.readyz.ok) reasons.push(`readyz failing: ${kube.readyz.failing.join(', ') || 'unspecified check'}`);
  for (const n of kube.nodes) {
    const r = readinessText(n, now);
    if (r) reasons.push(`node ${n.name} ${r}`);
  }
  return reasons;
}

export function assessCluster(input: ClusterInput): ClusterAssessment {
  const now = typeof input.now === 'number' ? input.now : input.now.getTime();
  const machines = input.machines.map((m) => assessMachine(m, input.kube, input));
  const etcd = assessEtcd(input.machines);
  const reasons = [...kubeReasons(input.kube, now), ...etcd.reasons];
  for (const m of machines) {
    // Readiness is already phrased per node above ("node w1 NotReady for 5m").
    for (const r of m.reasons) if (!r.startsWith('Kubernetes node NotReady') && !r.startsWith('Kubernetes node Ready status')) reasons.push(`${m.name}: ${r}`);
  }

  const kubeDown = isFailed(input.kube);
  const kubeRefused = kubeDown && REFUSED.has((input.kube as Failed).error.code);
  let state: HealthState;
  if (machines.length === 0) state = kubeDown ? 'unknown' : reasons.length ? 'degraded' : 'unknown';
  else if (kubeDown && !kubeRefused && machines.every((m) => m.state === 'unreachable')) state = 'unreachable';
  else if (kubeDown && machines.every((m) => m.state === 'unknown' || m.state === 'unreachable')) state = 'unknown';
  else state = reasons.length ? 'degraded' : 'healthy';

  const talosVersions = [...new Set(machines.map((m) => m.talosVersion).filter((v): v is string => v !== null))].sort();
  return {
    state,
    reasons,
    kubernetesVersion: kubeDown ? null : (input.kube as KubeSnapshot).version.gitVersion,
    talosVersions,
    etcd: etcd.summary,
    machines,
  };
}
