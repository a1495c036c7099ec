// The API's operations, each with the zod schemas its handler validates with. The document is
// generated from this list, and test/openapi.test.ts checks that every route the app serves is
// here, so a new route without a description fails the suite.
import type { z } from 'zod';
import { auditQuery } from '../audit/routes.ts';
import { collectBody, samplesQuery } from '../collect/routes.ts';
import { clusterUpdateInput } from '../inventory/cluster-settings.ts';
import { createCluster } from '../inventory/clusters.ts';
import { createMachine, updateMachine } from '../inventory/machines.ts';
import { createTenant, createToken } from '../inventory/tenants.ts';
import { putCredentials } from '../providers/routes.ts';
import { hookBody, provisionBody } from '../provision/routes.ts';
import { bootstrapBody, clusterPushBody, pushBody } from '../push-config/routes.ts';
import { defragBody, restoreBody, snapshotBody } from '../etcd/routes.ts';
import { meshBody } from '../mesh/routes.ts';
import { syncManifestsBody } from '../manifests/routes.ts';
import { eventsQuery, listQuery } from '../runs/routes.ts';
import { upgradeBody } from '../upgrade/routes.ts';
import { upgradeKubernetesBody } from '../upgrade/kubernetes-routes.ts';

export type Auth = 'bearer' | 'basic' | 'signature' | 'none';
export type Answer = 'json' | 'run' | 'events' | 'text' | 'yaml' | 'empty' | 'state' | 'file';

export interface Operation {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Hono's path form, `/v1/clusters/:id`. */
  path: string;
  tag: string;
  summary: string;
  auth: Auth;
  /** The scope a tenant token needs; `admin` when only the admin may call it. */
  scope?: 'read' | 'write' | 'secrets:read' | 'admin';
  body?: z.ZodType;
  query?: z.ZodType;
  /** What a success looks like: a JSON object, a queued run (202), an event stream, text. */
  answer: Answer;
  status?: number;
}

const op = (o: Operation) => o;

export function operations(): Operation[] {
  return [
    op({ method: 'get', path: '/healthz', tag: 'ops', summary: 'Liveness', auth: 'none', answer: 'json' }),
    op({ method: 'get', path: '/readyz', tag: 'ops', summary: 'Readiness: database reachable and every migration applied (503 otherwise)', auth: 'none', answer: 'json' }),
    op({ method: 'get', path: '/metrics', tag: 'ops', summary: 'Prometheus metrics', auth: 'bearer', scope: 'admin', answer: 'text' }),

    op({ method: 'get', path: '/v1/tenants', tag: 'tenants', summary: 'List the tenants the caller can see', auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'post', path: '/v1/tenants', tag: 'tenants', summary: 'Create a tenant', auth: 'bearer', scope: 'admin', body: createTenant, answer: 'json', status: 201 }),
    op({ method: 'get', path: '/v1/tenants/:tenant', tag: 'tenants', summary: 'Show a tenant', auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'get', path: '/v1/tenants/:tenant/tokens', tag: 'tenants', summary: "List a tenant's tokens (never their secrets)", auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'post', path: '/v1/tenants/:tenant/tokens', tag: 'tenants', summary: 'Mint a tenant token (shown once; never stronger than the caller)', auth: 'bearer', scope: 'write', body: createToken, answer: 'json', status: 201 }),
    op({ method: 'delete', path: '/v1/tenants/:tenant/tokens/:token', tag: 'tenants', summary: 'Revoke a tenant token', auth: 'bearer', scope: 'write', answer: 'empty', status: 204 }),
    op({ method: 'get', path: '/v1/tenants/:tenant/providers', tag: 'providers', summary: 'Which provider credentials are stored (names only)', auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'put', path: '/v1/tenants/:tenant/providers/:provider', tag: 'providers', summary: "Store a provider's credentials, sealed and never readable again", auth: 'bearer', scope: 'write', body: putCredentials, answer: 'json' }),
    op({ method: 'delete', path: '/v1/tenants/:tenant/providers/:provider', tag: 'providers', summary: "Delete a provider's credentials", auth: 'bearer', scope: 'write', answer: 'empty', status: 204 }),
    op({ method: 'post', path: '/v1/tenants/:tenant/webhook-secret', tag: 'webhooks', summary: "Mint the tenant's webhook HMAC secret (shown once)", auth: 'bearer', scope: 'write', answer: 'json', status: 201 }),

    op({ method: 'get', path: '/v1/clusters', tag: 'clusters', summary: 'List clusters', auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'post', path: '/v1/clusters', tag: 'clusters', summary: 'Create a cluster and its secrets', auth: 'bearer', scope: 'write', body: createCluster, answer: 'json', status: 201 }),
    op({ method: 'get', path: '/v1/clusters/:id', tag: 'clusters', summary: 'Show a cluster', auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'patch', path: '/v1/clusters/:id', tag: 'clusters', summary: "Change a cluster's settings (validated against every machine's config)", auth: 'bearer', scope: 'write', body: clusterUpdateInput, answer: 'json' }),
    op({ method: 'delete', path: '/v1/clusters/:id', tag: 'clusters', summary: 'Delete a cluster without machines or live tofu state', auth: 'bearer', scope: 'write', answer: 'empty', status: 204 }),
    op({ method: 'get', path: '/v1/clusters/:id/talosconfig', tag: 'clusters', summary: 'talosconfig with an os:admin client certificate (audited)', auth: 'bearer', scope: 'secrets:read', answer: 'yaml' }),
    op({ method: 'get', path: '/v1/clusters/:id/kubeconfig', tag: 'clusters', summary: 'kubeconfig with a system:masters client certificate (audited)', auth: 'bearer', scope: 'secrets:read', answer: 'yaml' }),
    op({ method: 'get', path: '/v1/clusters/:id/health', tag: 'health', summary: "The cluster's health rollup with reasons, per machine", auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'get', path: '/v1/clusters/:id/state/versions', tag: 'state', summary: "The cluster's tofu state versions", auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'get', path: '/v1/clusters/:id/state-lock', tag: 'state', summary: "Who holds the cluster's tofu state lock", auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'delete', path: '/v1/clusters/:id/state-lock', tag: 'state', summary: 'Force-unlock the tofu state', auth: 'bearer', scope: 'admin', answer: 'empty', status: 204 }),

    op({ method: 'get', path: '/v1/clusters/:id/machines', tag: 'machines', summary: "List a cluster's machines", auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'post', path: '/v1/clusters/:id/machines', tag: 'machines', summary: 'Add a machine', auth: 'bearer', scope: 'write', body: createMachine, answer: 'json', status: 201 }),
    op({ method: 'get', path: '/v1/clusters/:id/machines/:mid', tag: 'machines', summary: 'Show a machine', auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'patch', path: '/v1/clusters/:id/machines/:mid', tag: 'machines', summary: 'Change a machine (role, address, disk, patches)', auth: 'bearer', scope: 'write', body: updateMachine, answer: 'json' }),
    op({ method: 'delete', path: '/v1/clusters/:id/machines/:mid', tag: 'machines', summary: 'Delete a machine', auth: 'bearer', scope: 'write', answer: 'empty', status: 204 }),
    op({ method: 'get', path: '/v1/clusters/:id/machines/:mid/config', tag: 'machines', summary: "The machine's rendered Talos config (audited)", auth: 'bearer', scope: 'secrets:read', answer: 'yaml' }),
    op({ method: 'get', path: '/v1/clusters/:id/machines/:mid/samples', tag: 'health', summary: "A machine's health samples (raw or hourly)", auth: 'bearer', scope: 'read', query: samplesQuery, answer: 'json' }),

    op({ method: 'post', path: '/v1/clusters/:id/provision', tag: 'provision', summary: 'Queue a tofu plan, apply or destroy', auth: 'bearer', scope: 'write', body: provisionBody, answer: 'run' }),
    op({ method: 'post', path: '/v1/runs/:id/approve', tag: 'provision', summary: 'Apply exactly the plan a plan run saved (409 once the state moved)', auth: 'bearer', scope: 'write', answer: 'run' }),
    op({ method: 'post', path: '/v1/hooks/:tenant/clusters/:cluster/provision', tag: 'webhooks', summary: "GitHub-style webhook (X-Hub-Signature-256, X-GitHub-Delivery): queue a provision run of the named cluster; ?mode=plan|apply", auth: 'signature', answer: 'run' }),
    op({ method: 'post', path: '/v1/hooks/:tenant/provision', tag: 'webhooks', summary: 'Signed webhook: queue a provision run', auth: 'signature', body: hookBody, answer: 'run' }),
    op({ method: 'post', path: '/v1/clusters/:id/machines/:mid/push-config', tag: 'push-config', summary: "Push a bare-metal machine's config over the Talos API", auth: 'bearer', scope: 'write', body: pushBody, answer: 'run' }),
    op({ method: 'post', path: '/v1/clusters/:id/push-config', tag: 'push-config', summary: 'Push every named (default: every metal) machine in one run, concurrently; optionally bootstrap', auth: 'bearer', scope: 'write', body: clusterPushBody, answer: 'run' }),
    op({ method: 'post', path: '/v1/clusters/:id/etcd-snapshots', tag: 'etcd', summary: 'Take an etcd snapshot from a healthy control plane now', auth: 'bearer', scope: 'write', body: snapshotBody, answer: 'run' }),
    op({ method: 'get', path: '/v1/clusters/:id/etcd-snapshots', tag: 'etcd', summary: "List the cluster's etcd snapshots (size, revision, source)", auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'get', path: '/v1/clusters/:id/etcd-snapshots/:sid', tag: 'etcd', summary: 'Download an etcd snapshot (audited)', auth: 'bearer', scope: 'secrets:read', answer: 'file' }),
    op({ method: 'post', path: '/v1/clusters/:id/etcd-defrag', tag: 'etcd', summary: 'Defragment every etcd member (one at a time, the leader last), then disarm a NOSPACE alarm', auth: 'bearer', scope: 'write', body: defragBody, answer: 'run' }),
    op({ method: 'post', path: '/v1/clusters/:id/etcd-snapshots/:sid/restore', tag: 'etcd', summary: 'Restore a snapshot: EtcdRecover upload, then Bootstrap with recover_etcd', auth: 'bearer', scope: 'write', body: restoreBody, answer: 'run' }),
    op({ method: 'put', path: '/v1/clusters/:id/mesh', tag: 'mesh', summary: 'Turn on the WireGuard mesh: hub endpoint (IP literal or "stun") or relay; every machine gets a key and overlay address; a changed endpoint queues the re-push of affected nodes', auth: 'bearer', scope: 'write', body: meshBody, answer: 'json' }),
    op({ method: 'post', path: '/v1/clusters/:id/mesh/repush', tag: 'mesh', summary: 'Re-push, over the mesh, the configs of nodes that still dial an old hub endpoint', auth: 'bearer', scope: 'write', answer: 'run' }),
    op({ method: 'get', path: '/v1/clusters/:id/mesh', tag: 'mesh', summary: "The mesh and each peer's last handshake, endpoint and bytes", auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'delete', path: '/v1/clusters/:id/mesh', tag: 'mesh', summary: 'Turn the mesh off', auth: 'bearer', scope: 'write', answer: 'empty', status: 204 }),
    op({ method: 'post', path: '/v1/clusters/:id/bootstrap', tag: 'push-config', summary: 'Bootstrap etcd on the first configured control plane, once', auth: 'bearer', scope: 'write', body: bootstrapBody, answer: 'run' }),
    op({ method: 'post', path: '/v1/clusters/:id/upgrade', tag: 'upgrade', summary: 'Queue a rolling Talos upgrade', auth: 'bearer', scope: 'write', body: upgradeBody, answer: 'run' }),
    op({ method: 'post', path: '/v1/clusters/:id/upgrade-kubernetes', tag: 'upgrade', summary: 'Queue a Kubernetes version upgrade (static pods, kube-proxy, kubelets, then the bootstrap manifests)', auth: 'bearer', scope: 'write', body: upgradeKubernetesBody, answer: 'run' }),
    op({ method: 'post', path: '/v1/clusters/:id/sync-manifests', tag: 'upgrade', summary: "Apply the control planes' bootstrap manifests with server-side apply, prune what they no longer name, wait until what changed is ready (dryRun: report only)", auth: 'bearer', scope: 'write', body: syncManifestsBody, answer: 'run' }),
    op({ method: 'post', path: '/v1/collect', tag: 'health', summary: 'Queue a health collect pass', auth: 'bearer', scope: 'write', body: collectBody, answer: 'run' }),
    op({ method: 'post', path: '/v1/backups', tag: 'ops', summary: 'Queue a backup of the embedded database (409 while one is queued or running)', auth: 'bearer', scope: 'admin', answer: 'run' }),
    op({ method: 'get', path: '/v1/backups', tag: 'ops', summary: 'List the backup files, newest first', auth: 'bearer', scope: 'admin', answer: 'json' }),
    op({ method: 'get', path: '/v1/backups/:name', tag: 'ops', summary: 'Download a backup file', auth: 'bearer', scope: 'admin', answer: 'file' }),
    op({ method: 'delete', path: '/v1/backups/:name', tag: 'ops', summary: 'Delete a backup file', auth: 'bearer', scope: 'admin', answer: 'empty', status: 204 }),

    op({ method: 'get', path: '/v1/runs', tag: 'runs', summary: 'List runs, newest first', auth: 'bearer', scope: 'read', query: listQuery, answer: 'json' }),
    op({ method: 'get', path: '/v1/runs/:id', tag: 'runs', summary: 'Show a run', auth: 'bearer', scope: 'read', answer: 'json' }),
    op({ method: 'get', path: '/v1/runs/:id/events', tag: 'runs', summary: "A run's events: JSON pages (more, next, and last: the seq of its last event so far), or Server-Sent Events with Accept: text/event-stream (Last-Event-ID resumes)", auth: 'bearer', scope: 'read', query: eventsQuery, answer: 'events' }),
    op({ method: 'post', path: '/v1/runs/:id/cancel', tag: 'runs', summary: 'Cancel a queued or running run', auth: 'bearer', scope: 'write', answer: 'json', status: 202 }),
    op({ method: 'get', path: '/v1/audit', tag: 'ops', summary: 'The audit log', auth: 'bearer', scope: 'read', query: auditQuery, answer: 'json' }),

    op({ method: 'get', path: '/v1/state/:tenant/:cluster', tag: 'state', summary: 'tofu http backend: read the state (204 when none; ?version=N a kept version)', auth: 'basic', answer: 'state' }),
    op({ method: 'post', path: '/v1/state/:tenant/:cluster', tag: 'state', summary: 'tofu http backend: write a state version (?ID=<lock id> while locked)', auth: 'basic', answer: 'empty' }),
    op({ method: 'delete', path: '/v1/state/:tenant/:cluster', tag: 'state', summary: 'tofu http backend: hide the state (versions are kept)', auth: 'basic', answer: 'empty' }),
    op({ method: 'post', path: '/v1/state/:tenant/:cluster/lock', tag: 'state', summary: 'tofu http backend: lock (GitLab layout; LOCK on the state address does the same)', auth: 'basic', answer: 'empty' }),
    op({ method: 'delete', path: '/v1/state/:tenant/:cluster/lock', tag: 'state', summary: 'tofu http backend: unlock (GitLab layout; UNLOCK on the state address does the same)', auth: 'basic', answer: 'empty' }),
  ];
}

/**
 * Served, but not in the document: HTTP methods OpenAPI cannot name (tofu's LOCK/UNLOCK, which
 * the `/lock` operations mirror) and the dashboard's HTML pages.
 */
export const UNDOCUMENTED_METHODS = new Set(['LOCK', 'UNLOCK']);
export const isApiPath = (path: string) => path.startsWith('/v1/') || ['/healthz', '/readyz', '/metrics', '/openapi.json'].includes(path);
