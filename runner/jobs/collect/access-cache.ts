// Admin credentials per cluster, kept across collect passes, and the pooled mTLS channels that use
// them. Minting signs a certificate and parsing the TLS context costs a few milliseconds per
// cluster; a handshake per node per pass costs far more. The Kubernetes side is kept as the target
// the kubeconfig would describe, not as YAML: rendering it and reading it back cost as much as
// minting, every pass. An entry is replaced when the cluster's sealed secrets (hence its CAs), its
// name or its Kubernetes endpoint change, or when it is older than CREDENTIALS_TTL_MS; the
// channels of a replaced identity are closed at once.
import { createHash } from 'node:crypto';
import type { Agent } from 'node:https';
import type { SecureContext } from 'node:tls';
import { guardFor, type DialGuard } from '../../../lib/dial-guard.ts';
import { createTalosClient, createTalosSecureContext, TalosChannelPool, type TalosApiClient } from '../../../lib/talos/api/index.ts';
import { kubeAdminCredentials, kubeServerOf, talosAdminCredentials, type ClientCredentials } from '../../../lib/talos/clientconfig.ts';
import { kubeAgent } from '../../../lib/kube/http.ts';
import type { KubeTarget } from '../../../lib/kube/kubeconfig.ts';
import type { Deps } from '../../../functions/context.ts';
import type { ClusterRow } from '../../../functions/inventory/load.ts';
import { openClusterSecrets } from '../../../functions/machine-config/secrets.ts';

/** The admin certificates are valid for a year; re-minting daily keeps them far from expiry. */
export const CREDENTIALS_TTL_MS = 24 * 3_600_000;

/** Kubernetes API connections idle this long are closed, like the Talos channels. */
const KUBE_IDLE_MS = 5 * 60_000;

/**
 * One connection per cluster's API server: a pass's few small GETs queue on it rather than each
 * opening its own (HTTP/1.1 has one request in flight per connection), so a cold pass pays one
 * TLS handshake per cluster instead of four, on both ends.
 */
const KUBE_SOCKETS = 1;

const destroyAgent = (e: Entry): void => {
  e.kube?.then((k) => k.agent.destroy(), () => {});
};

interface TalosCredentials {
  identity: string;
  creds: ClientCredentials;
  context: SecureContext;
}

/** The admin kubeconfig's target and a keep-alive agent carrying its identity. */
export interface KubeAccess {
  target: KubeTarget;
  agent: Agent;
}

type AccessCluster = Pick<ClusterRow, 'id' | 'secretsSealed' | 'name' | 'endpoint'>;

interface Entry {
  sealed: string | null;
  name: string;
  endpoint: string;
  mintedAt: number;
  /** Minted on first use, so a pass can mint one cluster's after another and dial each as soon as it has them. */
  talos: Promise<TalosCredentials> | undefined;
  mintTalos: () => Promise<TalosCredentials>;
  /** Minted on first use: a pass reads the Kubernetes API after dialing every node, and minting is CPU the dials need. */
  kube: Promise<KubeAccess> | undefined;
  mintKube: () => Promise<KubeAccess>;
}

/** What a pass needs for one cluster: pooled Talos clients (never closed by the caller) and the Kubernetes API. */
export interface CollectAccess {
  talosClient(address: string): Promise<TalosApiClient>;
  /** Drops the pooled channel to `address`, e.g. after a failed read, so the next pass dials afresh. */
  discard(address: string): Promise<void>;
  /** The Kubernetes API: the admin kubeconfig's target and its keep-alive agent, kept with the credentials. */
  kube(): Promise<KubeAccess>;
  /** Mints the Talos credentials if need be; settles once they are minted (or failed to be). */
  talosReady(): Promise<void>;
}

/** Identity of an mTLS client: the CA it trusts and the certificate it presents. */
export function credentialsIdentity(c: Pick<ClientCredentials, 'caPem' | 'certPem'>): string {
  return createHash('sha256').update(c.caPem).update('\0').update(c.certPem).digest('hex');
}

export class CollectAccessCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    readonly channels: TalosChannelPool,
    private readonly now: () => number = Date.now,
  ) {}

  access(deps: Pick<Deps, 'sealer' | 'settings'>, cluster: AccessCluster): CollectAccess {
    const entry = this.entryFor(deps, cluster);
    const guard = guardFor(deps.settings.nodeNetworks);
    const talos = (): Promise<TalosCredentials> => (entry.talos ??= entry.mintTalos());
    return {
      talosClient: async (address) => {
        const t = await talos();
        return this.channels.get(address, t.identity, () =>
          createTalosClient({ mode: 'configured', address, ca: t.creds.caPem, cert: t.creds.certPem, key: t.creds.keyPem, secureContext: t.context, ...(guard ? { guard } : {}) }),
        );
      },
      discard: async (address) => {
        this.channels.discard(address, (await talos()).identity);
      },
      kube: () => (entry.kube ??= entry.mintKube()),
      talosReady: async () => {
        await Promise.allSettled([talos()]);
      },
    };
  }

  close(): void {
    for (const e of this.entries.values()) destroyAgent(e);
    this.entries.clear();
    this.channels.close();
  }

  private entryFor(deps: Pick<Deps, 'sealer' | 'settings'>, cluster: AccessCluster): Entry {
    const cur = this.entries.get(cluster.id);
    const fresh = cur && cur.sealed === cluster.secretsSealed && cur.name === cluster.name && cur.endpoint === cluster.endpoint && this.now() - cur.mintedAt < CREDENTIALS_TTL_MS;
    if (cur && fresh) return cur;
    if (cur) {
      this.entries.delete(cluster.id);
      // Channels authenticated with the replaced certificate must not outlive it.
      cur.talos?.then((t) => this.channels.invalidate(t.identity), () => {});
      destroyAgent(cur);
    }
    // Throws (no secrets) before anything is cached, so the next pass tries again.
    const secrets = openClusterSecrets(deps, cluster);
    const entry: Entry = {
      sealed: cluster.secretsSealed,
      name: cluster.name,
      endpoint: cluster.endpoint,
      mintedAt: this.now(),
      talos: undefined,
      mintTalos: () => {
        const talos = talosAdminCredentials(secrets).then((creds) => ({
          identity: credentialsIdentity(creds),
          creds,
          context: createTalosSecureContext(creds.caPem, creds.certPem, creds.keyPem),
        }));
        talos.catch(forget);
        return talos;
      },
      kube: undefined,
      mintKube: () => {
        const kube = kubeAccess(cluster.endpoint, secrets, guardFor(deps.settings.nodeNetworks));
        kube.catch(forget);
        return kube;
      },
    };
    // A failed mint is not kept: the next pass mints again.
    const forget = (): void => {
      if (this.entries.get(cluster.id) === entry) this.entries.delete(cluster.id);
    };
    this.entries.set(cluster.id, entry);
    return entry;
  }
}

/**
 * What renderKubeconfig's admin kubeconfig would give readKubeconfig (the same endpoint check, a
 * fresh admin certificate from the cluster's Kubernetes CA), built directly; its agent carries
 * one TLS context built here, not one per connection.
 */
async function kubeAccess(endpoint: string, secrets: Parameters<typeof kubeAdminCredentials>[0], guard: DialGuard | undefined): Promise<KubeAccess> {
  const server = kubeServerOf(endpoint);
  const creds = await kubeAdminCredentials(secrets);
  const target: KubeTarget = { server, ca: creds.caPem, cert: creds.certPem, key: creds.keyPem, insecure: false };
  return { target, agent: kubeAgent(target, { idleMs: KUBE_IDLE_MS, maxSockets: KUBE_SOCKETS, guard }) };
}

const caches = new WeakMap<object, CollectAccessCache>();

/** The runner's cache, one per Deps (one per runner process; tests get their own with their harness). */
export function collectAccessCache(deps: Pick<Deps, 'clock'>): CollectAccessCache {
  let cache = caches.get(deps);
  if (!cache) {
    const now = (): number => deps.clock.now();
    cache = new CollectAccessCache(new TalosChannelPool({ now }), now);
    caches.set(deps, cache);
  }
  return cache;
}

/** Shutdown hook: closes every pooled channel and forgets the credentials. */
export function closeCollectAccessCache(deps: object): void {
  caches.get(deps)?.close();
  caches.delete(deps);
}
