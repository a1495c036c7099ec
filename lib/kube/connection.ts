// One reading of an admin kubeconfig, shared by every Kubernetes caller (the collect pass, drains):
// the server, the TLS identity as a keep-alive agent, and any auth headers. Imports the client
// library, so it is itself only ever loaded on first use.
import https from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';

export interface KubeConnection {
  kc: KubeConfig;
  /** The server URL without credentials or trailing slash. */
  server: string;
  /** Keep-alive agent with the kubeconfig's TLS identity; the library's own when the kubeconfig names a proxy. */
  agent: https.Agent;
  /** Whether `agent` is ours (and so ours to destroy). */
  ownAgent: boolean;
  proxied: boolean;
  headers: Record<string, string>;
}

function withoutCredentials(server: string): string {
  try {
    const u = new URL(server);
    u.username = '';
    u.password = '';
    return u.toString().replace(/\/+$/, '');
  } catch {
    return '<invalid server URL>';
  }
}

/**
 * Parses the kubeconfig and builds its agent. `agent` reuses a caller's keep-alive agent (kept
 * across calls so they share TLS sessions) instead of making one.
 */
export async function openKubeConnection(kubeconfigYaml: string, agent?: https.Agent): Promise<KubeConnection> {
  const kc = new KubeConfig();
  try {
    kc.loadFromString(kubeconfigYaml);
  } catch {
    // The parser's message quotes the offending YAML, which may be key material.
    throw new Error('kubeconfig could not be parsed');
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const tls: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(tls);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(tls.headers ?? {})) if (typeof v === 'string') headers[k] = v;
  const proxied = !!cluster.proxyUrl;
  const ownAgent = !proxied && !agent;
  const chosen = proxied
    ? (tls.agent as https.Agent)
    : agent ??
      new https.Agent({
        keepAlive: true,
        ca: tls.ca,
        cert: tls.cert,
        key: tls.key,
        rejectUnauthorized: !cluster.skipTLSVerify,
        ...(cluster.tlsServerName ? { servername: cluster.tlsServerName } : {}),
      });
  return { kc, server: withoutCredentials(cluster.server), agent: chosen, ownAgent, proxied, headers };
}
