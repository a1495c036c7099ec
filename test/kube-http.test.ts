// The runner's own Kubernetes client: reading kubeconfigs (the forms RezusCloud renders and the
// ones a kubectl user might hand over) and the writer's requests against the simulated API server.
import { generateKeyPairSync } from 'node:crypto';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRejection } from './support/kube-errors.ts';
import { collectKubernetes } from '../lib/kube/collect.ts';
import { evictPod, openKubeWriter, setUnschedulable } from '../lib/kube/drain.ts';
import { parseRetryAfter } from '../lib/kube/http.ts';
import { readKubeconfig } from '../lib/kube/kubeconfig.ts';
import { encodePem } from '../lib/talos/pem.ts';
import { kubeNode } from '../runner/jobs/upgrade-kubernetes/kube.ts';
import { createTestCa, issueClientCert, type TestCa, type TestCert } from './sim/kube/certs.ts';
import { kubeconfigFor } from './sim/kube/kubeconfig.ts';
import { startKubeSim, type KubeSim } from './sim/kube/server.ts';

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');

function config(cluster: Record<string, unknown>, user: Record<string, unknown>, extra: Record<string, unknown> = {}): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'other', cluster: { server: 'https://192.0.2.99:6443' } },
      { name: 'c', cluster },
    ],
    users: [
      { name: 'nobody', user: { token: 'not-this-one' } },
      { name: 'u', user },
    ],
    contexts: [
      { name: 'first', context: { cluster: 'other', user: 'nobody' } },
      { name: 'ctx', context: { cluster: 'c', user: 'u' } },
    ],
    'current-context': 'ctx',
    ...extra,
  });
}


describe('readKubeconfig', () => {
  it('follows the current context, strips credentials from the server and decodes inline material', () => {
    const t = readKubeconfig(
      config(
        { server: 'https://admin:pw@kube.example:6443/', 'certificate-authority-data': b64('CA PEM'), 'tls-server-name': 'kubernetes' },
        { 'client-certificate-data': b64('CERT PEM'), 'client-key-data': b64('-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n'), token: 'tok' },
      ),
    );
    expect(t.server).toBe('https://kube.example:6443');
    expect(t.ca).toBe('CA PEM');
    expect(t.cert).toBe('CERT PEM');
    expect(t.key).toContain('BEGIN EC PRIVATE KEY');
    expect(t.servername).toBe('kubernetes');
    expect(t.authorization).toBe('Bearer tok');
    expect(t.insecure).toBe(false);
  });

  it('relabels a Talos Ed25519 key into the PKCS#8 form Node reads', () => {
    const der = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'der' });
    const talosKey = encodePem('ED25519 PRIVATE KEY', der);
    const t = readKubeconfig(config({ server: 'https://127.0.0.1:6443' }, { 'client-key-data': b64(talosKey) }));
    expect(t.key).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(t.key).not.toContain('ED25519');
  });

  it('turns username and password into basic auth', () => {
    const t = readKubeconfig(config({ server: 'https://127.0.0.1:6443' }, { username: 'a', password: 'b' }));
    expect(t.authorization).toBe(`Basic ${Buffer.from('a:b').toString('base64')}`);
  });

  it('refuses what it cannot honour, by name', () => {
    expect(() => readKubeconfig(config({ server: 'https://127.0.0.1:6443', 'proxy-url': 'socks5://127.0.0.1:1080' }, {}))).toThrow(/proxy-url/);
    expect(() => readKubeconfig(config({ server: 'https://127.0.0.1:6443' }, { exec: { command: 'aws' } }))).toThrow(/exec/);
    expect(() => readKubeconfig(config({ server: 'http://127.0.0.1:8080' }, {}))).toThrow(/https/);
    expect(() => readKubeconfig(config({ server: 'https://127.0.0.1:6443' }, {}, { 'current-context': 'missing' }))).toThrow(/no current cluster/);
  });

  it('never quotes the document when it does not parse', () => {
    const secret = b64('-----BEGIN PRIVATE KEY-----\nsecretsecret\n-----END PRIVATE KEY-----');
    let message = '';
    try {
      readKubeconfig(`users:\n  - user:\n      client-key-data: ${secret}\n   bad: [unclosed`);
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toBe('kubeconfig could not be parsed');
  });
});

describe('Retry-After', () => {
  it('reads delay-seconds and HTTP dates as ms from now, and nothing else', () => {
    const now = Date.parse('Sun, 06 Dec 2026 00:30:00 GMT');
    expect(parseRetryAfter('10', now)).toBe(10_000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Sun, 06 Dec 2026 00:30:07 GMT', now)).toBe(7_000);
    // A date already past means now, not a negative wait.
    expect(parseRetryAfter('Sun, 06 Dec 2026 00:29:00 GMT', now)).toBe(0);
    for (const bad of [undefined, '', '-5', '1.5', 'soon', '99999999999']) expect(parseRetryAfter(bad, now), String(bad)).toBeUndefined();
  });
});

describe('the client against the simulated API server', () => {
  let ca: TestCa;
  let admin: TestCert;
  let sim: KubeSim;

  beforeAll(async () => {
    ca = await createTestCa();
    admin = await issueClientCert(ca);
    sim = await startKubeSim({ ca, nodes: { n1: { kubeletVersion: 'v1.36.3' } } });
  });
  afterAll(async () => {
    await sim?.stop();
  });

  const withServerName = (name: string): string => {
    const doc = kubeconfigFor(sim, admin).replace(/^(\s*)server: .*$/m, `$1server: ${sim.url}\n$1tls-server-name: ${name}`);
    expect(readKubeconfig(doc).servername).toBe(name);
    return doc;
  };

  it('checks the server certificate against tls-server-name', async () => {
    const ok = await collectKubernetes(withServerName('kubernetes'), { deadlineMs: 5_000 });
    expect(ok.nodes.map((n) => n.name)).toEqual(['n1']);
    const err = await kubeRejection(collectKubernetes(withServerName('not-the-apiserver.example'), { deadlineMs: 5_000 }));
    expect(err.code).toBe('tls');
  });

  it('cordons with a patch the server applies, and reads a missing node as absent', async () => {
    const w = await openKubeWriter(kubeconfigFor(sim, admin), 5_000);
    try {
      await setUnschedulable(w, 'n1', true);
      const write = sim.writes.at(-1);
      expect(write).toMatchObject({ method: 'PATCH', path: '/api/v1/nodes/n1', body: { spec: { unschedulable: true } } });
      expect((await collectKubernetes(kubeconfigFor(sim, admin), { deadlineMs: 5_000 })).nodes[0]?.unschedulable).toBe(true);
      await setUnschedulable(w, 'n1', false);
      expect(sim.writes.at(-1)?.body).toEqual({ spec: { unschedulable: null } });

      const ac = new AbortController();
      expect(await kubeNode(w, 'gone', ac.signal)).toBeUndefined();
      const err = await kubeRejection(setUnschedulable(w, 'gone', true));
      expect(err.status).toBe(404);
      expect(err.message).toContain('/api/v1/nodes/gone');
    } finally {
      w.close();
    }
  });

  it("carries an answer's Retry-After to the caller: an eviction refused while its budget is being processed", async () => {
    sim.setPod({ namespace: 'apps', name: 'web-n1', nodeName: 'n1', labels: { app: 'web' }, ownerKind: 'ReplicaSet' });
    sim.setPdb({ namespace: 'apps', name: 'web-pdb', matchLabels: { app: 'web' }, disruptionsAllowed: 1, processing: true });
    const w = await openKubeWriter(kubeconfigFor(sim, admin), 5_000);
    try {
      expect(await evictPod(w, { namespace: 'apps', name: 'web-n1' })).toMatchObject({ outcome: 'blocked', retryAfterMs: 10_000 });
      // A budget that simply allows no disruption sends none (upstream's checkAndDecrement).
      sim.setPdb({ namespace: 'apps', name: 'web-pdb', matchLabels: { app: 'web' }, disruptionsAllowed: 0 });
      const refused = await evictPod(w, { namespace: 'apps', name: 'web-n1' });
      expect(refused.outcome).toBe('blocked');
      expect(refused.retryAfterMs).toBeUndefined();
    } finally {
      w.close();
    }
  });

  it('a writer request that gets no answer ends with code deadline', async () => {
    const w = await openKubeWriter(kubeconfigFor(sim, admin), 300);
    sim.blackhole(true);
    try {
      const err = await kubeRejection(setUnschedulable(w, 'n1', true));
      expect(err.code).toBe('deadline');
    } finally {
      sim.blackhole(false);
      w.close();
    }
  });

  it('a writer without a client certificate is refused as unauthenticated', async () => {
    const w = await openKubeWriter(kubeconfigFor(sim, null), 5_000);
    try {
      const err = await kubeRejection(setUnschedulable(w, 'n1', true));
      expect(err.code).toBe('unauthenticated');
    } finally {
      w.close();
    }
  });
});
