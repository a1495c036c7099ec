// A simulated Kubernetes API server: real HTTPS with mandatory client certificates signed by the
// cluster CA, answering the handful of endpoints a health collector reads.
// Authentication works like kube-apiserver's: TLS asks for a client certificate, and a request
// without one that chains to the cluster CA gets 401 (Node's own rejectUnauthorized would only
// drop the socket after the handshake, which no client can tell from a network fault).
// Authorization mimics the apiserver defaults: /version and the health probes are public
// (system:public-info-viewer), everything else needs the system:masters group.
// Nodes, pods, evictions and metrics come from the sim's own models below; every other resource
// (discovery, get/list, server-side apply, patch, create, delete) from the generic store in
// objects.ts, with workloads.ts reporting Deployment and DaemonSet rollouts.
import https from 'node:https';
import net from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { createTestCa, issueServerCert, type TestCa } from './certs.ts';
import { decodeBody, failure, ObjectStore } from './objects.ts';
import { WorkloadControllers } from './workloads.ts';

export interface SimNodeSpec {
  ready?: boolean;
  kubeletVersion?: string;
  addresses?: Array<{ type: string; address: string }>;
  unschedulable?: boolean;
  roles?: string[];
  /** ISO time of the last Ready change; defaults to the moment `ready` changes. */
  lastTransitionTime?: string;
  /** Conditions other than Ready that are True, e.g. MemoryPressure. */
  pressure?: string[];
  capacity?: { cpu: string; memory: string };
  usage?: { cpu: string; memory: string };
  /** metadata.annotations; a node PATCH merges into them (null removes one), as the apiserver does. */
  annotations?: Record<string, string>;
}

type SimNode = Required<Omit<SimNodeSpec, 'lastTransitionTime'>> & { name: string; lastTransitionTime: string };

export type MetricsMode = boolean | 'unavailable';

export interface SimPodSpec {
  namespace: string;
  name: string;
  nodeName: string;
  labels?: Record<string, string>;
  /** Kind of the controller owning it (DaemonSet pods are left alone by a drain). */
  ownerKind?: string;
  /** A static pod's mirror (annotation kubernetes.io/config.mirror). */
  mirror?: boolean;
  emptyDir?: boolean;
  /** The container's name and image (defaults: `c`, `busybox`). */
  container?: string;
  image?: string;
  /** The pod's Ready condition; absent: true. */
  ready?: boolean;
}

export interface SimDaemonSetSpec {
  namespace: string;
  name: string;
  container: string;
  image: string;
  /** Pods the DaemonSet schedules (one per node). */
  desired: number;
  /** Its labels, selector and pod template labels; default `{k8s-app: <name>}`. */
  labels?: Record<string, string>;
}

export interface SimDaemonSet extends SimDaemonSetSpec {
  generation: number;
  observedGeneration: number;
  updated: number;
  available: number;
}

export interface SimPdb {
  namespace: string;
  name: string;
  matchLabels: Record<string, string>;
  /** Evictions the budget allows now; 0 refuses with 429 until raised. */
  disruptionsAllowed: number;
  /**
   * The disruption controller has not observed the budget's latest generation yet: every eviction
   * it covers is refused with 429 and `Retry-After: 10`, as upstream's createTooManyRequestsError.
   */
  processing?: boolean;
}

/** One write the sim received, in arrival order. */
export interface KubeWrite {
  method: string;
  path: string;
  body: unknown;
}

export interface KubeSimOptions {
  ca?: TestCa;
  host?: '127.0.0.1' | '::1';
  gitVersion?: string;
  nodes?: Record<string, SimNodeSpec>;
  metrics?: MetricsMode;
}

export interface KubeSim {
  url: string;
  ca: TestCa;
  /** Paths (with query) of every request answered or held, in arrival order. */
  requests: string[];
  /** TLS handshakes completed, i.e. connections a client opened and kept. */
  readonly handshakes: number;
  setNode(name: string, spec: SimNodeSpec): void;
  /** The node's metadata.annotations as stored now (undefined: no such node). */
  nodeAnnotations(name: string): Record<string, string> | undefined;
  /** Whether the node is cordoned (spec.unschedulable) now (undefined: no such node). */
  nodeUnschedulable(name: string): boolean | undefined;
  removeNode(name: string): void;
  setReadyz(ok: boolean, failing?: string[]): void;
  /** What `/version` reports from now on (`v1.37.0`), as after the API servers were upgraded. */
  setVersion(gitVersion: string): void;
  /** true: served and discoverable; 'unavailable': discoverable but 503 (metrics-server down). */
  setMetrics(mode: MetricsMode): void;
  setLatency(ms: number): void;
  /** Accept TCP but never answer: neither the TLS handshake nor pending requests. */
  blackhole(on: boolean): void;
  /**
   * The next `reads` GETs answer 429 with `Retry-After: retryAfterS`, as API Priority and Fairness
   * does for a saturated priority level. `throttled` lists when each was answered (Date.now()).
   */
  throttle(reads: number, retryAfterS: number): void;
  readonly throttled: number[];
  /** PATCH, POST and DELETE requests answered, in arrival order. */
  writes: KubeWrite[];
  /** A deep copy of the stored object as the API serves it (metadata with managedFields, status), or undefined. */
  object(apiVersion: string, kind: string, namespace: string | undefined, name: string): Record<string, unknown> | undefined;
  /**
   * Stores `obj` as if `manager` (default `talos`) had written it: by default with a forced
   * server-side apply, as Talos applies its bootstrap manifests; `operation: 'Update'` as a create
   * or replace (kubectl create, a controller). No namespace check; a Deployment or DaemonSet
   * starts rolled out unless `obj` brings its own status. Returns the stored object.
   */
  putObject(obj: Record<string, unknown>, opts?: { manager?: string; operation?: 'Apply' | 'Update' }): Record<string, unknown>;
  /** Every stored object (of `kind`, when given), as served; nodes and pods are not among them. */
  objects(kind?: string): Array<Record<string, unknown>>;
  setPod(pod: SimPodSpec): void;
  pods(nodeName?: string): SimPodSpec[];
  setPdb(pdb: SimPdb): void;
  /** Seeds an apps/v1 DaemonSet as Talos applies it at bootstrap (see putObject), scheduling `desired` pods whatever the node count. */
  setDaemonSet(ds: SimDaemonSetSpec): void;
  daemonSet(namespace: string, name: string): SimDaemonSet | undefined;
  /**
   * How a Deployment or DaemonSet rolls out a new spec from now on: after `ms` every pod runs it;
   * `stuck` never gets there (a new image that never becomes available).
   */
  setRollout(opts: { ms?: number; stuck?: boolean }): void;
  /** How long an evicted pod takes to terminate and disappear. */
  setEvictionLatency(ms: number): void;
  /**
   * Deletes a namespace as the apiserver and its namespace controller do: from now on the
   * namespace takes no new content (an eviction there is a 403 with cause NamespaceTerminating),
   * and after `podsDeletedAfterMs` its pods are deleted (each gone after the eviction latency).
   */
  terminateNamespace(namespace: string, opts?: { podsDeletedAfterMs?: number }): void;
  /**
   * Serves `group/version` `resource` (a namespaced kind, `kind` its objects) with exactly these
   * objects, discoverable like a CRD's; `undefined` stops serving it (404, as an apiserver that
   * dropped the version).
   */
  setResource(api: { group: string; version: string; resource: string; kind: string }, objects: Array<{ namespace: string; name: string }> | undefined): void;
  stop(): Promise<void>;
}

const METRICS = 'metrics.k8s.io';
const METRICS_GROUP = { name: METRICS, versions: [{ groupVersion: `${METRICS}/v1beta1`, version: 'v1beta1' }], preferredVersion: { groupVersion: `${METRICS}/v1beta1`, version: 'v1beta1' } };
const METRICS_RESOURCES = {
  kind: 'APIResourceList',
  apiVersion: 'v1',
  groupVersion: `${METRICS}/v1beta1`,
  resources: [
    { name: 'nodes', singularName: '', namespaced: false, kind: 'NodeMetrics', verbs: ['get', 'list'] },
    { name: 'pods', singularName: '', namespaced: true, kind: 'PodMetrics', verbs: ['get', 'list'] },
  ],
};

const READYZ_CHECKS = ['ping', 'log', 'etcd', 'etcd-readiness', 'informer-sync', 'poststarthook/start-apiserver-admission-initializer', 'shutdown'];

const status = (code: number, reason: string, message: string): object => failure(code, reason, message);

export async function startKubeSim(opts: KubeSimOptions = {}): Promise<KubeSim> {
  const ca = opts.ca ?? (await createTestCa());
  const serverCert = await issueServerCert(ca);
  const host = opts.host ?? '127.0.0.1';
  let gitVersion = opts.gitVersion ?? 'v1.36.3';
  const nodes = new Map<string, SimNode>();
  let readyz = { ok: true, failing: [] as string[] };
  let metrics: MetricsMode = opts.metrics ?? false;
  let latencyMs = 0;
  let holeOn = false;
  let throttle = { left: 0, retryAfterS: 0 };
  const throttled: number[] = [];
  const requests: string[] = [];
  const writes: KubeWrite[] = [];
  let handshakes = 0;
  const pods = new Map<string, SimPodSpec & { terminating: boolean }>();
  const pdbs = new Map<string, SimPdb>();
  let rollout = { ms: 0, stuck: false };
  let evictionMs = 0;
  const terminatingNamespaces = new Set<string>();
  const podKey = (ns: string, name: string): string => `${ns}/${name}`;
  const sockets = new Set<net.Socket>();
  const timers = new Set<NodeJS.Timeout>();
  // Core-group (`''`) nodes and pods stay with the models above, which the drain and health suites shape.
  const store = new ObjectStore(new Set(['/nodes', '/pods']));
  const controllers = new WorkloadControllers(store, { nodeCount: () => nodes.size, rollout: () => rollout, timers });
  /** The container setDaemonSet named, which daemonSet() reports the image of. */
  const dsContainers = new Map<string, string>();

  function setNode(name: string, spec: SimNodeSpec): void {
    const prev = nodes.get(name);
    const ready = spec.ready ?? prev?.ready ?? true;
    const changed = prev === undefined || prev.ready !== ready;
    nodes.set(name, {
      name,
      ready,
      kubeletVersion: spec.kubeletVersion ?? prev?.kubeletVersion ?? gitVersion,
      addresses: spec.addresses ?? prev?.addresses ?? [{ type: 'Hostname', address: name }],
      unschedulable: spec.unschedulable ?? prev?.unschedulable ?? false,
      roles: spec.roles ?? prev?.roles ?? [],
      pressure: spec.pressure ?? prev?.pressure ?? [],
      capacity: spec.capacity ?? prev?.capacity ?? { cpu: '4', memory: '8Gi' },
      usage: spec.usage ?? prev?.usage ?? { cpu: '250m', memory: '1024Mi' },
      annotations: { ...(spec.annotations ?? prev?.annotations) },
      lastTransitionTime:
        spec.lastTransitionTime ?? (changed || !prev ? new Date().toISOString() : prev.lastTransitionTime),
    });
  }
  for (const [name, spec] of Object.entries(opts.nodes ?? {})) setNode(name, spec);

  function nodeObject(n: SimNode): object {
    const labels: Record<string, string> = { 'kubernetes.io/hostname': n.name, 'kubernetes.io/os': 'linux' };
    for (const r of n.roles) labels[`node-role.kubernetes.io/${r}`] = '';
    const cond = (type: string, isTrue: boolean): object => ({
      type,
      status: isTrue ? 'True' : 'False',
      lastHeartbeatTime: new Date().toISOString(),
      lastTransitionTime: n.lastTransitionTime,
      reason: type === 'Ready' ? (isTrue ? 'KubeletReady' : 'KubeletNotReady') : 'Sim',
      message: type === 'Ready' && !isTrue ? 'container runtime network not ready' : '',
    });
    return {
      kind: 'Node',
      apiVersion: 'v1',
      metadata: { name: n.name, uid: `uid-${n.name}`, labels, ...(Object.keys(n.annotations).length ? { annotations: { ...n.annotations } } : {}), creationTimestamp: '2026-01-01T00:00:00Z' },
      spec: n.unschedulable ? { unschedulable: true, taints: [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }] } : {},
      status: {
        capacity: { cpu: n.capacity.cpu, memory: n.capacity.memory, pods: '110' },
        allocatable: { cpu: n.capacity.cpu, memory: n.capacity.memory, pods: '110' },
        conditions: [
          ...['MemoryPressure', 'DiskPressure', 'PIDPressure'].map((t) => cond(t, n.pressure.includes(t))),
          cond('Ready', n.ready),
        ],
        addresses: n.addresses,
        nodeInfo: { kubeletVersion: n.kubeletVersion, osImage: 'Talos', containerRuntimeVersion: 'containerd://2.1.0' },
      },
    };
  }

  function podObject(p: SimPodSpec & { terminating: boolean }): object {
    return {
      kind: 'Pod',
      apiVersion: 'v1',
      metadata: {
        name: p.name,
        namespace: p.namespace,
        uid: `uid-${p.namespace}-${p.name}`,
        labels: p.labels ?? {},
        ...(p.mirror ? { annotations: { 'kubernetes.io/config.mirror': 'mirror-hash' } } : {}),
        ...(p.ownerKind ? { ownerReferences: [{ apiVersion: 'apps/v1', kind: p.ownerKind, name: `${p.name}-owner`, uid: 'owner', controller: true }] } : {}),
        ...(p.terminating ? { deletionTimestamp: new Date().toISOString() } : {}),
      },
      spec: { nodeName: p.nodeName, containers: [{ name: p.container ?? 'c', image: p.image ?? 'busybox' }], volumes: p.emptyDir ? [{ name: 'scratch', emptyDir: {} }] : [] },
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: p.ready === false ? 'False' : 'True' }] },
    };
  }

  function matches(labels: Record<string, string>, selector: Record<string, string>): boolean {
    return Object.entries(selector).every(([k, v]) => labels[k] === v);
  }

  /** The eviction subresource: a PDB with no disruptions left refuses with 429, as the apiserver does. */
  function evict(ns: string, name: string): { code: number; body: unknown; retryAfterS?: number } {
    const p = pods.get(podKey(ns, name));
    if (!p) return { code: 404, body: status(404, 'NotFound', `pods "${name}" not found`) };
    // NamespaceLifecycle admission refuses any create in a namespace being deleted, evictions too.
    if (terminatingNamespaces.has(ns)) {
      return {
        code: 403,
        body: {
          ...status(403, 'Forbidden', `pods "${name}" is forbidden: unable to create new content in namespace ${ns} because it is being terminated`),
          details: { name, kind: 'pods', causes: [{ type: 'NamespaceTerminating', message: `namespace ${ns} is being terminated`, field: 'metadata.namespace' }] },
        },
      };
    }
    if (p.terminating) return { code: 201, body: { kind: 'Status', apiVersion: 'v1', status: 'Success', code: 201 } };
    const budgets = [...pdbs.values()].filter((b) => b.namespace === ns && matches(p.labels ?? {}, b.matchLabels));
    if (budgets.length > 1) {
      return { code: 500, body: status(500, 'InternalError', 'This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.') };
    }
    const processing = budgets.find((b) => b.processing);
    if (processing) {
      return {
        code: 429,
        retryAfterS: 10,
        body: {
          ...status(429, 'TooManyRequests', "Cannot evict pod as it would violate the pod's disruption budget."),
          details: { retryAfterSeconds: 10, causes: [{ reason: 'DisruptionBudget', message: `The disruption budget ${processing.name} is still being processed by the server.` }] },
        },
      };
    }
    const blocked = budgets.find((b) => b.disruptionsAllowed <= 0);
    if (blocked) {
      return {
        code: 429,
        body: {
          ...status(429, 'TooManyRequests', "Cannot evict pod as it would violate the pod's disruption budget."),
          details: { causes: [{ reason: 'DisruptionBudget', message: `The disruption budget ${blocked.name} needs 1 healthy pods and has 1 currently` }] },
        },
      };
    }
    for (const b of budgets) b.disruptionsAllowed--;
    deletePod(p);
    return { code: 201, body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 } };
  }

  /** Marks the pod deleted (deletionTimestamp) and removes it once the eviction latency has passed. */
  function deletePod(p: SimPodSpec & { terminating: boolean }): void {
    p.terminating = true;
    later(evictionMs, () => void pods.delete(podKey(p.namespace, p.name)));
  }

  function later(ms: number, fn: () => void): void {
    if (ms <= 0) return fn();
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  }

  /** The stored DaemonSet in the shape the Kubernetes upgrade tests read. */
  function daemonSetView(ns: string, name: string): SimDaemonSet | undefined {
    const o = store.object('apps/v1', 'DaemonSet', ns, name) as
      | { metadata: { generation?: number }; spec?: { template?: { spec?: { containers?: Array<{ name: string; image?: string }> } } }; status?: Record<string, number> }
      | undefined;
    if (!o) return undefined;
    const containers = o.spec?.template?.spec?.containers ?? [];
    const c = containers.find((x) => x.name === dsContainers.get(podKey(ns, name))) ?? containers[0];
    const s = o.status ?? {};
    return {
      namespace: ns,
      name,
      container: c?.name ?? '',
      image: c?.image ?? '',
      desired: s.desiredNumberScheduled ?? 0,
      generation: o.metadata.generation ?? 1,
      observedGeneration: s.observedGeneration ?? 0,
      updated: s.updatedNumberScheduled ?? 0,
      available: s.numberAvailable ?? 0,
    };
  }

  function write(req: IncomingMessage, path: string, body: unknown): { code: number; body: unknown; retryAfterS?: number } | undefined {
    const node = /^\/api\/v1\/nodes\/([^/]+)$/.exec(path);
    if (node && req.method === 'PATCH') {
      const name = decodeURIComponent(node[1] ?? '');
      const n = nodes.get(name);
      if (!n) return { code: 404, body: status(404, 'NotFound', `nodes "${name}" not found`) };
      const type = req.headers['content-type'] ?? '';
      if (!/merge-patch\+json|strategic-merge-patch\+json/.test(type)) {
        return { code: 415, body: status(415, 'UnsupportedMediaType', `the body of the request was in an unknown format: ${type}`) };
      }
      const patch = body as { metadata?: { annotations?: Record<string, string | null> }; spec?: { unschedulable?: boolean | null } } | null;
      const spec = patch?.spec;
      if (spec && 'unschedulable' in spec) n.unschedulable = spec.unschedulable === true;
      for (const [k, v] of Object.entries(patch?.metadata?.annotations ?? {})) {
        if (v === null) delete n.annotations[k];
        else n.annotations[k] = v;
      }
      return { code: 200, body: nodeObject(n) };
    }
    const ev = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/eviction$/.exec(path);
    if (ev && req.method === 'POST') {
      const kind = (body as { kind?: string } | null)?.kind;
      if (kind !== 'Eviction') return { code: 400, body: status(400, 'BadRequest', 'expected an Eviction') };
      return evict(decodeURIComponent(ev[1] ?? ''), decodeURIComponent(ev[2] ?? ''));
    }
    return undefined;
  }

  function listPods(url: URL, ns: string | undefined): { code: number; body: unknown } {
    const selector = url.searchParams.get('fieldSelector') ?? '';
    let node: string | undefined;
    for (const part of selector.split(',').filter(Boolean)) {
      const m = /^spec\.nodeName=(.*)$/.exec(part);
      if (!m) return { code: 400, body: status(400, 'BadRequest', `field label not supported: ${part}`) };
      node = m[1];
    }
    // Equality-based label selectors only (`k=v,k2=v2`), which is all the clients here send.
    const labels: Record<string, string> = {};
    for (const part of (url.searchParams.get('labelSelector') ?? '').split(',').filter(Boolean)) {
      const m = /^\s*([^=!\s]+)\s*==?\s*([^=\s]*)\s*$/.exec(part);
      if (!m) return { code: 400, body: status(400, 'BadRequest', `unable to parse requirement: ${part}`) };
      labels[m[1]!] = m[2]!;
    }
    const items = [...pods.values()]
      .filter((p) => (ns === undefined || p.namespace === ns) && (node === undefined || p.nodeName === node) && matches(p.labels ?? {}, labels))
      .map(podObject);
    return { code: 200, body: { kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: '1' }, items } };
  }

  function groups(req: IncomingMessage): string[] {
    const subject = (req.socket as TLSSocket).getPeerCertificate().subject;
    const o = subject?.O;
    return o === undefined ? [] : Array.isArray(o) ? o : [o];
  }

  function storeRequest(req: IncomingMessage, url: URL, path: string, contentType: string, body: unknown): Parameters<ObjectStore['serve']>[0] {
    return { method: req.method ?? 'GET', path, query: url.searchParams, contentType, userAgent: req.headers['user-agent'] ?? '', body };
  }

  function route(req: IncomingMessage, text: string): { code: number; body: unknown; text?: boolean; retryAfterS?: number } {
    if (!(req.socket as TLSSocket).authorized) return { code: 401, body: status(401, 'Unauthorized', 'Unauthorized') };
    const url = new URL(req.url ?? '/', 'https://sim');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    if (req.method === 'GET' && throttle.left > 0) {
      throttle.left--;
      throttled.push(Date.now());
      return { code: 429, retryAfterS: throttle.retryAfterS, body: { ...status(429, 'TooManyRequests', 'Too many requests, please try again later.'), details: { retryAfterSeconds: throttle.retryAfterS } } };
    }
    if (req.method !== 'GET') {
      if (!groups(req).includes('system:masters')) return { code: 403, body: status(403, 'Forbidden', 'forbidden') };
      const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      const decoded = decodeBody(contentType, text);
      if ('error' in decoded) return decoded.error;
      const answer = write(req, path, decoded.body) ?? store.serve(storeRequest(req, url, path, contentType, decoded.body));
      if (answer) writes.push({ method: req.method ?? '', path, body: decoded.body });
      return answer ?? { code: 405, body: status(405, 'MethodNotAllowed', 'method not allowed') };
    }
    if (path === '/livez') return { code: 200, body: 'ok', text: true };
    if (path === '/readyz') {
      const verbose = url.searchParams.has('verbose');
      if (readyz.ok && !verbose) return { code: 200, body: 'ok', text: true };
      const checks = [...new Set([...READYZ_CHECKS, ...readyz.failing])];
      // Like the apiserver, a failing readyz lists every check even without ?verbose.
      const lines = checks.map((c) => (readyz.failing.includes(c) ? `[-]${c} failed: reason withheld` : `[+]${c} ok`));
      return {
        code: readyz.ok ? 200 : 500,
        body: `${lines.join('\n')}\nreadyz check ${readyz.ok ? 'passed' : 'failed'}\n`,
        text: true,
      };
    }
    if (path === '/version') {
      const [major, minor] = gitVersion.replace(/^v/, '').split('.');
      return { code: 200, body: { major, minor, gitVersion, platform: 'linux/amd64', goVersion: 'go1.25.0' } };
    }
    if (!groups(req).includes('system:masters')) {
      const user = (req.socket as TLSSocket).getPeerCertificate().subject?.CN ?? 'unknown';
      return { code: 403, body: status(403, 'Forbidden', `forbidden: User "${String(user)}" cannot get path "${path}"`) };
    }
    if (path === '/api') return { code: 200, body: { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] } };
    if (path === '/apis') {
      const list = store.types.groups();
      if (metrics !== false) list.push(METRICS_GROUP);
      return { code: 200, body: { kind: 'APIGroupList', apiVersion: 'v1', groups: list } };
    }
    if (path.startsWith(`/apis/${METRICS}`) && metrics !== false) {
      // An aggregated API: with metrics-server down, the apiserver answers 503 for all of it.
      if (metrics === 'unavailable') return { code: 503, body: 'service unavailable', text: true };
      if (path === `/apis/${METRICS}`) return { code: 200, body: { kind: 'APIGroup', apiVersion: 'v1', ...METRICS_GROUP } };
      if (path === `/apis/${METRICS}/v1beta1`) return { code: 200, body: METRICS_RESOURCES };
    }
    if (path === '/api/v1/pods') return listPods(url, undefined);
    const nsPods = /^\/api\/v1\/namespaces\/([^/]+)\/pods$/.exec(path);
    if (nsPods) return listPods(url, decodeURIComponent(nsPods[1] ?? ''));
    const onePod = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)$/.exec(path);
    if (onePod) {
      const p = pods.get(podKey(decodeURIComponent(onePod[1] ?? ''), decodeURIComponent(onePod[2] ?? '')));
      return p ? { code: 200, body: podObject(p) } : { code: 404, body: failure(404, 'NotFound', `pods "${decodeURIComponent(onePod[2] ?? '')}" not found`, { name: decodeURIComponent(onePod[2] ?? ''), kind: 'pods' }) };
    }
    if (path === '/api/v1/nodes') {
      const items = [...nodes.values()].sort((a, b) => a.name.localeCompare(b.name)).map(nodeObject);
      return { code: 200, body: { kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: '1' }, items } };
    }
    const one = /^\/api\/v1\/nodes\/([^/]+)$/.exec(path);
    if (one) {
      const n = nodes.get(decodeURIComponent(one[1] ?? ''));
      return n ? { code: 200, body: nodeObject(n) } : { code: 404, body: status(404, 'NotFound', `nodes "${one[1]}" not found`) };
    }
    if (path === `/apis/${METRICS}/v1beta1/nodes` && metrics !== false) {
      const items = [...nodes.values()].map((n) => ({
        metadata: { name: n.name, labels: {} },
        timestamp: new Date().toISOString(),
        window: '10.5s',
        usage: { cpu: n.usage.cpu, memory: n.usage.memory },
      }));
      return { code: 200, body: { kind: 'NodeMetricsList', apiVersion: 'metrics.k8s.io/v1beta1', metadata: {}, items } };
    }
    if (!path.startsWith(`/apis/${METRICS}/`)) {
      const answer = store.serve(storeRequest(req, url, path, '', null));
      if (answer) return answer;
    }
    return { code: 404, body: status(404, 'NotFound', 'the server could not find the requested resource') };
  }

  function respond(res: ServerResponse, r: { code: number; body: unknown; text?: boolean; retryAfterS?: number }): void {
    const payload = r.text ? String(r.body) : JSON.stringify(r.body);
    // As the apiserver's error writer: a Status with details.retryAfterSeconds > 0 sends the header too.
    res.writeHead(r.code, { 'content-type': r.text ? 'text/plain; charset=utf-8' : 'application/json', ...(r.retryAfterS ? { 'retry-after': String(r.retryAfterS) } : {}) });
    res.end(payload);
  }

  const tlsServer = https.createServer(
    { cert: serverCert.certPem, key: serverCert.keyPem, ca: [ca.certPem], requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      requests.push(req.url ?? '/');
      if (holeOn) return; // held until stop() destroys the socket
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => serve(req, res, chunks));
    },
  );
  function serve(req: IncomingMessage, res: ServerResponse, chunks: Buffer[]): void {
      const answer = route(req, Buffer.concat(chunks).toString('utf8'));
      if (latencyMs <= 0) return respond(res, answer);
      const t = setTimeout(() => {
        timers.delete(t);
        if (!res.destroyed) respond(res, answer);
      }, latencyMs);
      timers.add(t);
  }
  // An API server keeps idle connections far longer than Node's default 5 s (Go's for minutes):
  // a client's keep-alive connection outlives the minute between two collect passes.
  tlsServer.keepAliveTimeout = 120_000;
  tlsServer.on('secureConnection', () => {
    handshakes++;
  });
  tlsServer.on('tlsClientError', (_err, tlsSocket) => {
    // Handshakes the client abandons (it distrusts our certificate) are expected in the suites.
    tlsSocket.destroy();
  });

  // A plain TCP front lets the sim swallow connections before TLS starts, like a dropped route.
  const front = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    if (holeOn) return;
    tlsServer.emit('connection', socket);
  });
  await new Promise<void>((resolve, reject) => {
    front.once('error', reject);
    front.listen(0, host, () => resolve());
  });
  const port = (front.address() as net.AddressInfo).port;
  const url = host.includes(':') ? `https://[${host}]:${port}` : `https://${host}:${port}`;

  return {
    url,
    ca,
    requests,
    get handshakes() {
      return handshakes;
    },
    writes,
    setPod: (pod) => void pods.set(podKey(pod.namespace, pod.name), { ...pod, terminating: false }),
    pods: (nodeName) => [...pods.values()].filter((p) => nodeName === undefined || p.nodeName === nodeName).map(({ terminating: _t, ...p }) => p),
    object: (apiVersion, kind, ns, name) => store.object(apiVersion, kind, ns, name),
    putObject: (obj, opts) => store.put(obj, opts?.manager ?? 'talos', opts?.operation),
    objects: (kind) => store.all(kind),
    setPdb: (pdb) => void pdbs.set(podKey(pdb.namespace, pdb.name), { ...pdb }),
    setDaemonSet: (d) => {
      controllers.pin(d.namespace, d.name, d.desired);
      dsContainers.set(podKey(d.namespace, d.name), d.container);
      const labels = d.labels ?? { 'k8s-app': d.name };
      store.put(
        {
          apiVersion: 'apps/v1',
          kind: 'DaemonSet',
          metadata: { name: d.name, namespace: d.namespace, labels },
          spec: { selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: d.container, image: d.image }] } } },
        },
        'talos',
      );
    },
    daemonSet: (ns, name) => daemonSetView(ns, name),
    setRollout: (opts) => {
      rollout = { ms: opts.ms ?? 0, stuck: opts.stuck ?? false };
    },
    setEvictionLatency: (ms) => {
      evictionMs = ms;
    },
    terminateNamespace: (ns, opts = {}) => {
      terminatingNamespaces.add(ns);
      later(opts.podsDeletedAfterMs ?? 0, () => {
        for (const p of pods.values()) if (p.namespace === ns && !p.terminating) deletePod(p);
      });
    },
    setResource: (api, objects) => {
      store.types.remove(api.group, api.version, api.resource);
      store.clear(api.group, api.resource);
      if (!objects) return;
      store.types.put({ ...api, namespaced: true, verbs: ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch'], generation: true, custom: true });
      const apiVersion = `${api.group}/${api.version}`;
      for (const o of objects) store.put({ apiVersion, kind: api.kind, metadata: { namespace: o.namespace, name: o.name } }, 'talos');
    },
    setNode,
    nodeAnnotations: (name) => {
      const a = nodes.get(name)?.annotations;
      return a ? { ...a } : undefined;
    },
    nodeUnschedulable: (name) => nodes.get(name)?.unschedulable,
    removeNode: (name) => void nodes.delete(name),
    setVersion: (v) => {
      gitVersion = v;
    },
    setReadyz: (ok, failing = []) => {
      readyz = { ok, failing: ok ? [] : failing };
    },
    setMetrics: (mode) => {
      metrics = mode;
    },
    setLatency: (ms) => {
      latencyMs = ms;
    },
    throttle: (reads, retryAfterS) => {
      throttle = { left: reads, retryAfterS };
    },
    throttled,
    blackhole: (on) => {
      holeOn = on;
    },
    stop: async () => {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const s of sockets) s.destroy();
      tlsServer.closeAllConnections();
      await new Promise<void>((resolve) => front.close(() => resolve()));
    },
  };
}
