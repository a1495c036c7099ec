/**
 * Child process of bench/collect.ts, bench/push.ts and bench/upgrade.ts: hosts the simulated fleet (Talos nodes and Kubernetes API
 * servers) so the collector's CPU and memory are measured apart from the sims', as they would
 * be against real machines. Driven over the IPC channel.
 */
import { startKubeSim, type KubeSim, type SimNodeSpec, type SimPodSpec } from '../test/sim/kube/server.ts';
import { startSimNode, type SimEtcdMember, type SimTalosNode } from '../test/sim/talos/index.ts';
import { kubeSimCa } from '../test/support/collect-fleet-ca.ts';
import { startProfile, type Profiling } from './cpu-profile.ts';

export type SimRequest =
  | { op: 'kube'; ca: { certPem: string; keyPem: string }; clusters: string[][] }
  | { op: 'kube-cluster'; ca: { certPem: string; keyPem: string }; nodes: Record<string, SimNodeSpec>; pods: SimPodSpec[]; evictionLatencyMs: number }
  | {
      op: 'talos';
      latencyMs: number;
      workerIssuer: { certPem: string; keyPem: string };
      nodes: { config: string; etcdMembers?: SimEtcdMember[]; etcdLeader?: string; version?: string; rebootMs?: number }[];
    }
  | { op: 'maintenance'; count: number; latencyMs: number; rebootMs: number }
  | { op: 'blackhole'; indices: number[] }
  | { op: 'cpu' }
  /** A full GC now, so the old-space collection the setup's garbage is due does not land in the measured window. */
  | { op: 'settle' }
  /** Starts (dir absent) or stops and writes to dir a CPU profile of this child: a pass's window, not the setup. */
  | { op: 'profile'; dir?: string }
  | { op: 'stop' };

const kubes: KubeSim[] = [];
let profiler: Profiling | undefined;
const sims: SimTalosNode[] = [];

async function handle(req: SimRequest): Promise<unknown> {
  switch (req.op) {
    case 'kube': {
      const ca = await kubeSimCa(req.ca);
      const started = await Promise.all(req.clusters.map((names) => startKubeSim({ ca, metrics: true, nodes: Object.fromEntries(names.map((n) => [n, {}])) })));
      kubes.push(...started);
      return started.map((k) => k.url);
    }
    case 'kube-cluster': {
      const kube = await startKubeSim({ ca: await kubeSimCa(req.ca), nodes: req.nodes });
      kube.setEvictionLatency(req.evictionLatencyMs);
      for (const pod of req.pods) kube.setPod(pod);
      kubes.push(kube);
      return kube.url;
    }
    case 'talos': {
      const started = await Promise.all(
        req.nodes.map((n) =>
          startSimNode({
            initialConfig: n.config,
            workerIssuer: req.workerIssuer,
            ...(n.etcdMembers ? { etcdMembers: n.etcdMembers } : {}),
            ...(n.version ? { version: n.version } : {}),
            ...(n.rebootMs !== undefined ? { rebootMs: n.rebootMs } : {}),
          }),
        ),
      );
      started.forEach((s, i) => {
        s.setLatency(req.latencyMs);
        const leader = req.nodes[i]?.etcdLeader;
        if (leader !== undefined) s.setEtcdLeader(leader);
      });
      sims.push(...started);
      return started.map((s) => s.address);
    }
    case 'maintenance': {
      const started = await Promise.all(Array.from({ length: req.count }, () => startSimNode({ rebootMs: req.rebootMs })));
      for (const s of started) s.setLatency(req.latencyMs);
      sims.push(...started);
      return started.map((s) => ({ address: s.address, fingerprint: s.maintenanceFingerprint }));
    }
    case 'blackhole':
      for (const i of req.indices) sims[i]!.blackhole(true);
      return req.indices.length;
    case 'cpu': {
      const c = process.cpuUsage();
      return (c.user + c.system) / 1000;
    }
    case 'settle':
      (globalThis as { gc?: () => void }).gc?.();
      return true;
    case 'profile': {
      if (req.dir === undefined) {
        profiler ??= await startProfile(true);
        return true;
      }
      if (!profiler) return false;
      await profiler.stop(`${req.dir}/sims-${process.pid}-${Date.now()}.cpuprofile`);
      profiler = undefined;
      return true;
    }
    case 'stop':
      await Promise.all(sims.map((s) => s.stop()));
      await Promise.all(kubes.map((k) => k.stop()));
      setImmediate(() => process.exit(0));
      return true;
  }
}

process.on('message', (msg: { id: number; req: SimRequest }) => {
  handle(msg.req).then(
    (result) => process.send!({ id: msg.id, result }),
    (err: unknown) => process.send!({ id: msg.id, error: err instanceof Error ? err.message : String(err) }),
  );
});
process.on('disconnect', () => process.exit(0));
