// One reading of an admin kubeconfig, shared by every Kubernetes caller (the collect pass, drains,
// upgrades): the server and the TLS identity as a keep-alive agent.
import type https from 'node:https';
import type { DialGuard } from '../dial-guard.ts';
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
 * Reads the kubeconfig (or takes a target read before) and builds its agent. `agent` reuses a
 * caller's keep-alive agent (kept across calls so they share TLS sessions) instead of making one;
 * one made here dials only where `guard` allows (a caller's agent carries its own).
 */
export function openKubeConnection(kubeconfig: string | KubeTarget, agent?: https.Agent, guard?: DialGuard): KubeConnection {
  const target = typeof kubeconfig === 'string' ? readKubeconfig(kubeconfig) : kubeconfig;
  return { target, server: target.server, agent: agent ?? kubeAgent(target, { guard }), ownAgent: !agent };
}
