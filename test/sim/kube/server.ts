// A simulated Kubernetes API server: real HTTPS with mandatory client certificates signed by the
// cluster CA, answering the handful of endpoints a health collector reads.
// Authentication works like kube-apiserver's: TLS asks for a client certificate, and a request
// without one that chains to the cluster CA gets 401 (Node's own rejectUnauthorized would only
// drop the socket after the handshake, which no client can tell from a network fault).
// Authorization mimics the apiserver defaults: /version and the health probes are public
// (system:public-info-viewer), everything else needs the system:masters group.
import https from 'node:https';
import net from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { createTestCa, issueServerCert, type TestCa } from './certs.ts';

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
}

type SimNode = Required<Omit<SimNodeSpec, 'lastTransitionTime'>> & { name: string; lastTransitionTime: string };

export type MetricsMode = boolean | 'unavailable';

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
  setNode(name: string, spec: SimNodeSpec): void;
  removeNode(name: string): void;
  setReadyz(ok: boolean, failing?: string[]): void;
  /** true: served and discoverable; 'unavailable': discoverable but 503 (metrics-server down). */
  setMetrics(mode: MetricsMode): void;
  setLatency(ms: number): void;
  /** Accept TCP but never answer: neither the TLS handshake nor pending requests. */
  blackhole(on: boolean): void;
  stop(): Promise<void>;
}

const READYZ_CHECKS = ['ping', 'log', 'etcd', 'etcd-readiness', 'informer-sync', 'poststarthook/start-apiserver-admission-initializer', 'shutdown'];

function status(code: number, reason: string, message: string): object {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

export async function startKubeSim(opts: KubeSimOptions = {}): Promise<KubeSim> {
  const ca = opts.ca ?? (await createTestCa());
  const serverCert = await issueServerCert(ca);
  const host = opts.host ?? '127.0.0.1';
  const gitVersion = opts.gitVersion ?? 'v1.36.3';
  const nodes = new Map<string, SimNode>();
  let readyz = { ok: true, failing: [] as string[] };
  let metrics: MetricsMode = opts.metrics ?? false;
  let latencyMs = 0;
  let holeOn = false;
  const requests: string[] = [];
  const sockets = new Set<net.Socket>();
  const timers = new Set<NodeJS.Timeout>();

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
      metadata: { name: n.name, uid: `uid-${n.name}`, labels, creationTimestamp: '2026-01-01T00:00:00Z' },
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

  function groups(req: IncomingMessage): string[] {
    const subject = (req.socket as TLSSocket).getPeerCertificate().subject;
    const o = subject?.O;
    return o === undefined ? [] : Array.isArray(o) ? o : [o];
  }

  function route(req: IncomingMessage): { code: number; body: unknown; text?: boolean } {
    if (!(req.socket as TLSSocket).authorized) return { code: 401, body: status(401, 'Unauthorized', 'Unauthorized') };
    const url = new URL(req.url ?? '/', 'https://sim');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    if (req.method !== 'GET') return { code: 405, body: status(405, 'MethodNotAllowed', 'method not allowed') };
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
      const list = [{ name: 'apps', versions: [{ groupVersion: 'apps/v1', version: 'v1' }], preferredVersion: { groupVersion: 'apps/v1', version: 'v1' } }];
      if (metrics !== false) {
        const v = { groupVersion: 'metrics.k8s.io/v1beta1', version: 'v1beta1' };
        list.push({ name: 'metrics.k8s.io', versions: [v], preferredVersion: v });
      }
      return { code: 200, body: { kind: 'APIGroupList', apiVersion: 'v1', groups: list } };
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
    if (path === '/apis/metrics.k8s.io/v1beta1/nodes' && metrics !== false) {
      if (metrics === 'unavailable') return { code: 503, body: 'service unavailable', text: true };
      const items = [...nodes.values()].map((n) => ({
        metadata: { name: n.name, labels: {} },
        timestamp: new Date().toISOString(),
        window: '10.5s',
        usage: { cpu: n.usage.cpu, memory: n.usage.memory },
      }));
      return { code: 200, body: { kind: 'NodeMetricsList', apiVersion: 'metrics.k8s.io/v1beta1', metadata: {}, items } };
    }
    return { code: 404, body: status(404, 'NotFound', 'the server could not find the requested resource') };
  }

  function respond(res: ServerResponse, r: { code: number; body: unknown; text?: boolean }): void {
    const payload = r.text ? String(r.body) : JSON.stringify(r.body);
    res.writeHead(r.code, { 'content-type': r.text ? 'text/plain; charset=utf-8' : 'application/json' });
    res.end(payload);
  }

  const tlsServer = https.createServer(
    { cert: serverCert.certPem, key: serverCert.keyPem, ca: [ca.certPem], requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      requests.push(req.url ?? '/');
      if (holeOn) return; // held until stop() destroys the socket
      const answer = route(req);
      if (latencyMs <= 0) return respond(res, answer);
      const t = setTimeout(() => {
        timers.delete(t);
        if (!res.destroyed) respond(res, answer);
      }, latencyMs);
      timers.add(t);
    },
  );
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
    setNode,
    removeNode: (name) => void nodes.delete(name),
    setReadyz: (ok, failing = []) => {
      readyz = { ok, failing: ok ? [] : failing };
    },
    setMetrics: (mode) => {
      metrics = mode;
    },
    setLatency: (ms) => {
      latencyMs = ms;
    },
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
