// Parent side of bench/collect-sims.ts: starts the simulator children and sends them requests over IPC.
import { fork, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { SimRequest } from './collect-sims.ts';
import type { Harness } from '../test/support/harness.ts';

type Send = <T>(req: SimRequest) => Promise<T>;

function startChild(): Send & { child: ChildProcess } {
  const child = fork(fileURLToPath(new URL('./collect-sims.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx', '--expose-gc', ...(process.env.SIM_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.SIM_CPU_PROF}`] : [])], stdio: 'inherit' });
  let nextId = 0;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  child.on('message', (m: { id: number; result?: unknown; error?: string }) => {
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.error !== undefined) p?.reject(new Error(m.error));
    else p?.resolve(m.result);
  });
  child.on('exit', () => {
    for (const p of pending.values()) p.reject(new Error('sim child exited'));
    pending.clear();
  });
  const send = <T>(req: SimRequest): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      child.send({ id, req });
    });
  return Object.assign(send, { child });
}

/** Splits `items` into `n` contiguous shares, as even as they can be. */
function shares<T>(items: T[], n: number): T[][] {
  return Array.from({ length: n }, (_, i) => items.slice(Math.floor((i * items.length) / n), Math.floor(((i + 1) * items.length) / n)));
}

/**
 * Child processes hosting the sims, so a bench measures the product's CPU, not the simulator's,
 * and the sims of a big fleet do not queue behind one event loop (real nodes each have their own
 * CPU). Requests that start sims are spread over the children; results come back in request
 * order and sim indices (blackhole) are the fleet's, so callers see one fleet.
 */
export function startSimFleet(opts: { processes?: number } = {}): Send {
  const n = Math.max(1, opts.processes ?? Math.min(4, availableParallelism()));
  const children = Array.from({ length: n }, () => startChild());
  // Where each sim the fleet started lives: its child and its index there.
  const talosAt: Array<{ child: number; index: number }> = [];
  const startedIn = children.map(() => 0);

  async function spread<Item, R>(items: Item[], make: (share: Item[]) => SimRequest, trackTalos: boolean): Promise<R[]> {
    const parts = shares(items, n);
    const results = await Promise.all(parts.map((part, c) => (part.length === 0 ? Promise.resolve([] as R[]) : children[c]!<R[]>(make(part)))));
    if (trackTalos) {
      results.forEach((r, c) => {
        for (let i = 0; i < r.length; i++) talosAt.push({ child: c, index: startedIn[c]! + i });
        startedIn[c]! += r.length;
      });
    }
    return results.flat();
  }

  return (async (req: SimRequest): Promise<unknown> => {
    switch (req.op) {
      case 'maintenance':
        return spread(Array.from({ length: req.count }, (_, i) => i), (part) => ({ ...req, count: part.length }), true);
      case 'talos':
        return spread(req.nodes, (part) => ({ ...req, nodes: part }), true);
      case 'kube':
        return spread(req.clusters, (part) => ({ ...req, clusters: part }), false);
      case 'kube-cluster':
        // One API server is one process, as it would be.
        return children[0]!(req);
      case 'blackhole': {
        const byChild = children.map((): number[] => []);
        for (const i of req.indices) {
          const at = talosAt[i];
          if (!at) throw new Error(`no sim ${i}`);
          byChild[at.child]!.push(at.index);
        }
        await Promise.all(byChild.map((indices, c) => (indices.length ? children[c]!({ op: 'blackhole', indices }) : undefined)));
        return req.indices.length;
      }
      case 'settle':
      case 'profile':
        await Promise.all(children.map((c) => c({ ...req })));
        return true;
      case 'cpu': {
        const each = await Promise.all(children.map((c) => c<number>({ op: 'cpu' })));
        return each.reduce((a, b) => a + b, 0);
      }
      case 'stop':
        await Promise.all(children.map((c) => c({ op: 'stop' }).catch(() => false)));
        return true;
    }
  }) as Send;
}

/** A harness API call that must succeed; its body. */
export async function must(h: Harness, method: string, path: string, body?: unknown) {
  const res = await h.call(method, path, body === undefined ? {} : { body });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export interface SeededMachine {
  clusterId: string;
  id: string;
  name: string;
  role: string;
  config: string;
}

/**
 * A configured fleet in the harness's database: `clusters` clusters named c0…, each with the
 * machines `names` (cp* are control planes) and one Kubernetes sim, and one Talos sim per machine
 * running its generated config, answering every call after `latencyMs`. Machines are recorded at
 * their sim's address and marked configured, as a collect pass expects them.
 */
export async function seedSimulatedFleet(
  h: Harness,
  sims: Send,
  opts: { clusters: number; names: readonly string[]; latencyMs: number },
): Promise<{ clusterIds: string[]; machines: SeededMachine[]; addresses: string[]; kubeUrls: string[] }> {
  const secrets = await h.deps.newClusterSecrets();
  const tenant = await must(h, 'POST', '/v1/tenants', { name: 'bench' });
  const kubeUrls = await sims<string[]>({ op: 'kube', ca: secrets.certs.k8s, clusters: Array.from({ length: opts.clusters }, () => [...opts.names]) });
  const clusterIds: string[] = [];
  const machines: SeededMachine[] = [];
  for (let ci = 0; ci < opts.clusters; ci++) {
    const cluster = await must(h, 'POST', '/v1/clusters', { tenant: tenant.id, name: `c${ci}`, talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3', endpoint: kubeUrls[ci] });
    clusterIds.push(cluster.id);
    for (const name of opts.names) {
      const role = name.startsWith('cp') ? 'controlplane' : 'worker';
      const m = await must(h, 'POST', `/v1/clusters/${cluster.id}/machines`, { name, role, provider: 'metal' });
      const config = (await must(h, 'GET', `/v1/clusters/${cluster.id}/machines/${m.id}/config`)) as string;
      machines.push({ clusterId: cluster.id, id: m.id, name, role, config });
    }
  }
  const etcdMembers = opts.names.slice(0, 3).map((n, i) => ({ id: String(1000 + i), hostname: n }));
  const addresses = await sims<string[]>({
    op: 'talos',
    latencyMs: opts.latencyMs,
    workerIssuer: secrets.certs.os,
    nodes: machines.map((m) => ({ config: m.config, ...(m.role === 'controlplane' ? { etcdMembers } : {}) })),
  });
  for (const [i, m] of machines.entries()) await must(h, 'PATCH', `/v1/clusters/${m.clusterId}/machines/${m.id}`, { address: addresses[i] });
  await h.deps.database.client.execute("UPDATE machines SET state = 'configured'");
  return { clusterIds, machines, addresses, kubeUrls };
}
