// A cluster set up through the API whose machines are Talos sims started with the configs
// RezusCloud rendered for them, and whose Kubernetes endpoint is a kube sim under the cluster's CA.
import { startKubeSim, type KubeSim } from '../sim/kube/server.ts';
import { importTestCa } from '../sim/kube/certs.ts';
import { startSimNode, type SimTalosNode } from '../sim/talos/index.ts';
import { afterEach } from 'vitest';
import type { Worker } from '../../runner/worker.ts';
import { sharedSecrets, type Harness } from './harness.ts';

export interface MachineSpec {
  name: string;
  role: 'controlplane' | 'worker';
  /** Talos version the sim runs; the cluster's own when absent. */
  version?: string;
  rebootMs?: number;
}

export interface UpgradeCluster {
  clusterId: string;
  tenantId: string;
  kube: KubeSim;
  sims: Map<string, SimTalosNode>;
  machineIds: Map<string, string>;
  sim(name: string): SimTalosNode;
  stop(): Promise<void>;
}

/** `cp1..cpN`, `w1..wM` (zero-padded when there are ten or more, so name order is numeric order). */
export function fleet(controlPlanes: number, workers: number, extra: Partial<MachineSpec> = {}): MachineSpec[] {
  const pad = (i: number, n: number): string => String(i).padStart(n >= 10 ? 2 : 1, '0');
  return [
    ...Array.from({ length: controlPlanes }, (_, i) => ({ name: `cp${pad(i + 1, controlPlanes)}`, role: 'controlplane' as const, ...extra })),
    ...Array.from({ length: workers }, (_, i) => ({ name: `w${pad(i + 1, workers)}`, role: 'worker' as const, ...extra })),
  ];
}

export async function startUpgradeCluster(
  h: Harness,
  opts: { talosVersion: string; machines: MachineSpec[]; rebootMs?: number; /** Default 1.36.3. */ kubernetesVersion?: string },
): Promise<UpgradeCluster> {
  const secrets = await sharedSecrets();
  const kubernetesVersion = opts.kubernetesVersion ?? '1.36.3';
  const kube = await startKubeSim({ ca: await importTestCa(secrets.certs.k8s.certPem, secrets.certs.k8s.keyPem), gitVersion: `v${kubernetesVersion}` });
  const sims = new Map<string, SimTalosNode>();
  const machineIds = new Map<string, string>();
  const stop = async (): Promise<void> => {
    await Promise.all([...sims.values()].map((s) => s.stop()));
    await kube.stop();
  };
  try {
    const t = await h.call('POST', '/v1/tenants', { body: { name: `t${Date.now().toString(36)}` } });
    const cl = await h.call('POST', '/v1/clusters', {
      body: { tenant: t.body.id, name: 'up', talosVersion: opts.talosVersion, kubernetesVersion, endpoint: kube.url },
    });
    if (cl.status !== 201) throw new Error(`cluster: ${cl.status} ${JSON.stringify(cl.body)}`);
    const clusterId = cl.body.id as string;
    await Promise.all(
      opts.machines.map(async (spec) => {
        // The sim's port is known only once it listens; the config does not depend on it.
        const m = await h.call('POST', `/v1/clusters/${clusterId}/machines`, {
          body: { name: spec.name, role: spec.role, provider: 'metal', address: '127.0.0.1:1' },
        });
        if (m.status !== 201) throw new Error(`machine ${spec.name}: ${m.status} ${JSON.stringify(m.body)}`);
        machineIds.set(spec.name, m.body.id);
        const config = await h.call('GET', `/v1/clusters/${clusterId}/machines/${m.body.id}/config`);
        if (config.status !== 200) throw new Error(`config ${spec.name}: ${config.status}`);
        const sim = await startSimNode({
          version: spec.version ?? opts.talosVersion,
          rebootMs: spec.rebootMs ?? opts.rebootMs ?? 50,
          initialConfig: config.body as string,
          ...(spec.role === 'worker' ? { workerIssuer: secrets.certs.os } : {}),
        });
        sims.set(spec.name, sim);
        const moved = await h.call('PATCH', `/v1/clusters/${clusterId}/machines/${m.body.id}`, { body: { address: sim.address } });
        if (moved.status !== 200) throw new Error(`address ${spec.name}: ${moved.status}`);
        kube.setNode(spec.name, { roles: spec.role === 'controlplane' ? ['control-plane'] : [] });
      }),
    );
    const members = opts.machines
      .filter((m) => m.role === 'controlplane')
      .map((m, i) => ({ id: String(1000 + i), hostname: m.name }));
    // The last control plane by name leads etcd, so leader-last ordering keeps name order unless a test moves it.
    for (const m of opts.machines) {
      if (m.role !== 'controlplane') continue;
      sims.get(m.name)!.setEtcdMembers(members);
      sims.get(m.name)!.setEtcdLeader(members.at(-1)?.id);
    }
    return {
      clusterId,
      tenantId: t.body.id,
      kube,
      sims,
      machineIds,
      sim: (name) => {
        const s = sims.get(name);
        if (!s) throw new Error(`no sim ${name}`);
        return s;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** What a test of a simulated cluster started; `stoppedAfterEach` stops it after every test. */
export interface Started {
  h?: Harness;
  worker?: Worker;
  cluster?: UpgradeCluster;
  /** The kube sim's link to the Talos sims (test/sim/kube/talos-link.ts), stopped first. */
  link?: { stop(): void };
}

/** Registers an afterEach that stops the link, the worker, then the sims, then the harness, and forgets them. */
export function stoppedAfterEach(): Started {
  const started: Started = {};
  afterEach(async () => {
    started.link?.stop();
    await started.worker?.stop(0);
    await started.cluster?.stop();
    await started.h?.close();
    delete started.worker;
    delete started.cluster;
    delete started.h;
    delete started.link;
  });
  return started;
}
