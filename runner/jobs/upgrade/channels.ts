// Connections an upgrade run keeps for its whole length: an mTLS client per node for the health
// reads (the precheck reads every node before each step), and one Kubernetes agent shared by the
// health reads, cordons, drains and uncordons. Without them each read paid a TLS handshake.
import type { Agent } from 'node:https';
import type { TalosApiClient } from '../../../lib/talos/api/index.ts';
import type { KubeConnection } from '../../../lib/kube/connection.ts';
import { openKubeWriter, type KubeWriter } from '../../../lib/kube/drain.ts';
import type { ClusterAccess } from '../cluster-access.ts';

export interface RunChannels {
  /** The kept client to a node for health reads; the caller must not close it. */
  talos(address: string): Promise<TalosApiClient>;
  /** Drops the kept client: after a failed read, and before the node reboots (its channel would break). */
  forget(address: string): void;
  /** The run's keep-alive agent for the Kubernetes API. */
  kubeAgent(): Promise<Agent | undefined>;
  /** A writer on the shared agent; closing it leaves the agent open. */
  kubeWriter(deadlineMs: number): Promise<KubeWriter>;
  close(): void;
}

export function runChannels(access: ClusterAccess): RunChannels {
  const clients = new Map<string, Promise<TalosApiClient>>();
  let kube: Promise<KubeConnection> | undefined;
  const connection = (): Promise<KubeConnection> =>
    (kube ??= (async () => {
      const { openKubeConnection } = await import('../../../lib/kube/connection.ts');
      return openKubeConnection(await access.kubeconfig(), undefined, access.dialGuard);
    })());
  const forget = (address: string): void => {
    const c = clients.get(address);
    clients.delete(address);
    void c?.then((x) => x.close(), () => {});
  };
  return {
    talos(address) {
      let c = clients.get(address);
      if (!c) {
        c = access.talosClient(address);
        clients.set(address, c);
        c.catch(() => clients.delete(address));
      }
      return c;
    },
    forget,
    async kubeAgent() {
      return (await connection()).agent;
    },
    async kubeWriter(deadlineMs) {
      const k = await connection();
      return openKubeWriter(await access.kubeconfig(), deadlineMs, { agent: k.agent });
    },
    close() {
      for (const address of [...clients.keys()]) forget(address);
      void kube?.then((k) => {
        if (k.ownAgent) k.agent.destroy();
      }, () => {});
    },
  };
}
