// Builds a real cluster for the collect suites: created through the API, each machine served by a
// Talos sim configured with the machine's rendered config (so it speaks mTLS with the cluster's
// OS CA), and a Kubernetes API sim signed by the cluster's Kubernetes CA at the cluster endpoint.
import { expect } from 'vitest';
import { startKubeSim, type KubeSim, type MetricsMode, type SimNodeSpec } from '../sim/kube/server.ts';
import { kubeSimCa } from './collect-fleet-ca.ts';
import { startSimNode, type SimEtcdMember, type SimTalosNode } from '../sim/talos/index.ts';
import { finishedRun, type ApiAccess } from './harness.ts';
import { eq } from 'drizzle-orm';
import { clusters } from '../../db/schema/index.ts';
import { openClusterSecrets } from '../../functions/machine-config/secrets.ts';

export interface MachineSpec {
  name: string;
  role: 'controlplane' | 'worker';
  /** Left in state `new` without an address: the pass must skip it. */
  unconfigured?: boolean;
  etcdMembers?: SimEtcdMember[];
  kube?: SimNodeSpec | null;
}

export interface SimCluster {
  tenantId: string;
  clusterId: string;
  kube: KubeSim;
  machines: Record<string, { id: string; sim?: SimTalosNode }>;
  stop(): Promise<void>;
}

export async function startSimCluster(
  h: ApiAccess,
  opts: { tenant: string; cluster?: string; machines: MachineSpec[]; metrics?: MetricsMode; tenantId?: string },
): Promise<SimCluster> {
  let tenantId = opts.tenantId;
  if (!tenantId) {
    const t = await h.call('POST', '/v1/tenants', { body: { name: opts.tenant } });
    expect(t.status, JSON.stringify(t.body)).toBe(201);
    tenantId = t.body.id as string;
  }
  const cl = await h.call('POST', '/v1/clusters', {
    body: { tenant: tenantId, name: opts.cluster ?? 'c1', talosVersion: 'v1.13.9', kubernetesVersion: '1.36.3', endpoint: 'https://127.0.0.1:6443' },
  });
  expect(cl.status, JSON.stringify(cl.body)).toBe(201);
  const clusterId = cl.body.id as string;
  // The Kubernetes sim is signed by this cluster's own CA, then the cluster is pointed at it.
  const row = await h.deps.db.select().from(clusters).where(eq(clusters.id, clusterId)).get();
  const secrets = openClusterSecrets(h.deps, row!);
  const nodes: Record<string, SimNodeSpec> = {};
  for (const m of opts.machines) {
    if (m.kube !== null && !m.unconfigured) nodes[m.name] = { roles: m.role === 'controlplane' ? ['control-plane'] : [], ...m.kube };
  }
  const kube = await startKubeSim({ ca: await kubeSimCa(secrets.certs.k8s), nodes, metrics: opts.metrics ?? true });
  const pointed = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { endpoint: kube.url } });
  expect(pointed.status, JSON.stringify(pointed.body)).toBe(200);
  const machines: SimCluster['machines'] = {};
  const sims: SimTalosNode[] = [];
  try {
    for (const m of opts.machines) {
      const res = await h.call('POST', `/v1/clusters/${clusterId}/machines`, { body: { name: m.name, role: m.role, provider: 'metal' } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      const id = res.body.id as string;
      if (m.unconfigured) {
        machines[m.name] = { id };
        continue;
      }
      const config = await h.call('GET', `/v1/clusters/${clusterId}/machines/${id}/config`);
      expect(config.status).toBe(200);
      const sim = await startSimNode({
        initialConfig: config.body as string,
        workerIssuer: { certPem: secrets.certs.os.certPem, keyPem: secrets.certs.os.keyPem },
        ...(m.etcdMembers ? { etcdMembers: m.etcdMembers } : m.role === 'controlplane' ? { etcdMembers: [{ id: '101', hostname: m.name }] } : {}),
      });
      sims.push(sim);
      const patched = await h.call('PATCH', `/v1/clusters/${clusterId}/machines/${id}`, { body: { address: sim.address } });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      // Config delivery is another function's job; here the sim already runs the config.
      await h.deps.database.client.execute({ sql: "UPDATE machines SET state = 'configured' WHERE id = ?", args: [id] });
      machines[m.name] = { id, sim };
    }
  } catch (err) {
    await Promise.all(sims.map((s) => s.stop()));
    await kube.stop();
    throw err;
  }
  return {
    tenantId,
    clusterId,
    kube,
    machines,
    async stop() {
      await Promise.all(sims.map((s) => s.stop()));
      await kube.stop();
    },
  };
}

/**
 * Queues a collect pass of one cluster and returns its run once it has ended. Passes are exclusive
 * and a runner's own schedule may have one going (409 run_active): that one is waited out and the
 * pass asked for again, so the pass returned started after this call.
 */
export async function collectPass(h: ApiAccess, clusterId: string) {
  const timeoutMs = 20_000;
  let queued = await h.call('POST', '/v1/collect', { body: { cluster: clusterId } });
  const active = queued.status === 409 ? queued.body.error?.details?.activeRun : undefined;
  if (active) {
    await finishedRun(h, active, timeoutMs);
    queued = await h.call('POST', '/v1/collect', { body: { cluster: clusterId } });
  }
  expect(queued.status, JSON.stringify(queued.body)).toBe(202);
  return finishedRun(h, queued.body.run.id, timeoutMs);
}
