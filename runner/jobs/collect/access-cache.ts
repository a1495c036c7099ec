// Admin credentials per cluster, kept across collect passes, and the pooled mTLS channels that use
// them. Minting signs a certificate and parsing the TLS context costs a few milliseconds per
// cluster; a handshake per node per pass costs far more. An entry is replaced when the cluster's
// sealed secrets (hence its CAs), its name or its Kubernetes endpoint change, or when it is older
// than CREDENTIALS_TTL_MS; the channels of a replaced identity are closed at once.
import { createHash } from 'node:crypto';
import { Agent } from 'node:https';
import { createSecureContext, type SecureContext } from 'node:tls';
import { parse as parseYaml } from 'yaml';
import { createTalosClient, createTalosSecureContext, TalosChannelPool, type TalosApiClient } from '../../../lib/talos/api/index.ts';
import { renderKubeconfig, talosAdminCredentials, type ClientCredentials } from '../../../lib/talos/clientconfig.ts';
import type { Deps } from '../../../functions/context.ts';
import type { ClusterRow } from '../../../functions/inventory/load.ts';
import { openClusterSecrets } from '../../../functions/machine-config/secrets.ts';
import { toNodeKeyPem } from '../../../lib/talos/pki.ts';

/** The admin certificates are valid for a year; re-minting daily keeps them far from expiry. */
export const CREDENTIALS_TTL_MS = 24 * 3_600_000;

/** Kubernetes API connections idle this long are closed, like the Talos channels. */
const KUBE_IDLE_MS = 5 * 60_000;

const destroyAgent = (e: Entry): void => {
  e.kubeAgent.then((a) => a.destroy(), () => {});
};

type AccessCluster = Pick<ClusterRow, 'id' | 'secretsSealed' | 'name' | 'endpoint'>;

interface Entry {
  sealed: string | null;
  name: string;
  endpoint: string;
  mintedAt: number;
  talos: Promise<{ identity: string; creds: ClientCredentials; context: SecureContext }>;
  kubeconfig: Promise<string>;
  kubeAgent: Promise<Agent>;
}

/** What a pass needs for one cluster: pooled Talos clients (never closed by the caller) and the kubeconfig. */
export interface CollectAccess {
  talosClient(address: string): Promise<TalosApiClient>;
  /** Drops the pooled channel to `address`, e.g. after a failed read, so the next pass dials afresh. */
  discard(address: string): Promise<void>;
  kubeconfig(): Promise<string>;
  /** Keep-alive agent for the Kubernetes API, kept with the credentials (see CollectOptions.agent). */
  kubeAgent(): Promise<Agent>;
  /** Settles once every credential of the cluster is minted (or failed to be). */
  ready(): Promise<void>;
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

  access(deps: Pick<Deps, 'sealer'>, cluster: AccessCluster): CollectAccess {
    const entry = this.entryFor(deps, cluster);
    const talos = (): Promise<{ identity: string; creds: ClientCredentials; context: SecureContext }> => entry.talos;
    return {
      talosClient: async (address) => {
        const t = await talos();
        return this.channels.get(address, t.identity, () =>
          createTalosClient({ mode: 'configured', address, ca: t.creds.caPem, cert: t.creds.certPem, key: t.creds.keyPem, secureContext: t.context }),
        );
      },
      discard: async (address) => {
        this.channels.discard(address, (await talos()).identity);
      },
      kubeconfig: () => entry.kubeconfig,
      kubeAgent: () => entry.kubeAgent,
      ready: async () => {
        await Promise.allSettled([entry.talos, entry.kubeconfig, entry.kubeAgent]);
      },
    };
  }

  close(): void {
    for (const e of this.entries.values()) destroyAgent(e);
    this.entries.clear();
    this.channels.close();
  }

  private entryFor(deps: Pick<Deps, 'sealer'>, cluster: AccessCluster): Entry {
    const cur = this.entries.get(cluster.id);
    const fresh = cur && cur.sealed === cluster.secretsSealed && cur.name === cluster.name && cur.endpoint === cluster.endpoint && this.now() - cur.mintedAt < CREDENTIALS_TTL_MS;
    if (cur && fresh) return cur;
    if (cur) {
      this.entries.delete(cluster.id);
      // Channels authenticated with the replaced certificate must not outlive it.
      cur.talos.then((t) => this.channels.invalidate(t.identity), () => {});
      destroyAgent(cur);
    }
    // Throws (no secrets) before anything is cached, so the next pass tries again.
    const secrets = openClusterSecrets(deps, cluster);
    const talos = talosAdminCredentials(secrets).then((creds) => ({
      identity: credentialsIdentity(creds),
      creds,
      context: createTalosSecureContext(creds.caPem, creds.certPem, creds.keyPem),
    }));
    const kubeconfig = renderKubeconfig({ clusterName: cluster.name, endpoint: cluster.endpoint, secrets });
    const entry: Entry = {
      sealed: cluster.secretsSealed,
      name: cluster.name,
      endpoint: cluster.endpoint,
      mintedAt: this.now(),
      talos,
      kubeconfig,
      kubeAgent: kubeconfig.then(kubeAgentFor),
    };
    // A failed mint is not kept: the next pass mints again.
    const forget = (): void => {
      if (this.entries.get(cluster.id) === entry) this.entries.delete(cluster.id);
    };
    talos.catch(forget);
    entry.kubeconfig.catch(forget);
    entry.kubeAgent.catch(forget);
    this.entries.set(cluster.id, entry);
    return entry;
  }
}

type KubeconfigDoc = {
  clusters?: { cluster?: Record<string, string> }[];
  users?: { user?: Record<string, string> }[];
};

/**
 * The keep-alive agent carries the kubeconfig's own admin certificate (minting a second one per
 * cluster cost as much again), with one TLS context built here: an agent given PEMs builds a
 * context, parsing every key and certificate, for each connection it opens.
 */
function kubeAgentFor(kubeconfigYaml: string): Agent {
  const doc = parseYaml(kubeconfigYaml) as KubeconfigDoc;
  const pem = (b64: string | undefined): string => Buffer.from(b64 ?? '', 'base64').toString('utf8');
  const secureContext = createSecureContext({
    ca: pem(doc.clusters?.[0]?.cluster?.['certificate-authority-data']),
    cert: pem(doc.users?.[0]?.user?.['client-certificate-data']),
    key: toNodeKeyPem(pem(doc.users?.[0]?.user?.['client-key-data'])),
  });
  return new Agent({ keepAlive: true, secureContext, timeout: KUBE_IDLE_MS });
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
