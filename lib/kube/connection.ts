// One reading of an admin kubeconfig, shared by every Kubernetes caller (the collect pass, drains,
// upgrades): the server and the TLS identity as a keep-alive agent.
import type https from 'node:https';
import { kubeAgent } from './http.ts';
import { readKubeconfig, type KubeTarget } from './kubeconfig.ts';

export interface KubeConnection {
  target: KubeTarget;
  /** The server URL without credentials or trailing slash. */
  server: string;
  /** Keep-alive agent with the kubeconfig's TLS identity. */
  agent: https.Agent;
  /** Whether `agent` is ours (and so ours to destroy). */
  ownAgent: boolean;
}

/**
 * Reads the kubeconfig and builds its agent. `agent` reuses a caller's keep-alive agent (kept
 * across calls so they share TLS sessions) instead of making one.
 */
export function openKubeConnection(kubeconfigYaml: string, agent?: https.Agent): KubeConnection {
  const target = readKubeconfig(kubeconfigYaml);
  return { target, server: target.server, agent: agent ?? kubeAgent(target), ownAgent: !agent };
}
