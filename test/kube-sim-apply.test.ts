// The kube sim's generic API as a server-side-apply manifest sync meets it: discovery, apply with
// field ownership and conflicts, dry runs, deletes, and the rollout status Deployments and
// DaemonSets report. Plain HTTPS with the admin client certificate, so what is asserted is the wire.
import https from 'node:https';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestCa, issueClientCert, type TestCa, type TestCert } from './sim/kube/certs.ts';
import { startKubeSim, type KubeSim } from './sim/kube/server.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the answers are arbitrary Kubernetes JSON
type Json = any;

let ca: TestCa;
let admin: TestCert;
let sim: KubeSim;

beforeAll(async () => {
  ca = await createTestCa();
  admin = await issueClientCert(ca);
});
beforeEach(async () => {
  sim = await startKubeSim({ ca, nodes: { n1: {}, n2: {} } });
});
afterEach(async () => {
  await sim.stop();
});

interface CallOpts {
  body?: unknown;
  contentType?: string;
  cert?: TestCert;
  userAgent?: string;
}

function call(method: string, path: string, opts: CallOpts = {}): Promise<{ status: number; body: Json }> {
  const u = new URL(sim.url);
  const data = opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
  const cert = opts.cert ?? admin;
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: u.hostname,
        port: u.port,
        path,
        method,
        ca: ca.certPem,
        cert: cert.certPem,
        key: cert.keyPem,
        agent: false,
        headers: {
          accept: 'application/json',
          ...(opts.userAgent ? { 'user-agent': opts.userAgent } : {}),
          ...(data !== undefined ? { 'content-type': opts.contentType ?? 'application/json', 'content-length': Buffer.byteLength(data) } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, body: res.headers['content-type']?.startsWith('application/json') ? JSON.parse(text) : text });
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const APPLY = 'application/apply-patch+yaml';
const apply = (path: string, manager: string, body: unknown, extra = ''): Promise<{ status: number; body: Json }> =>
  call('PATCH', `${path}?fieldManager=${manager}${extra}`, { body, contentType: APPLY });

const DEPLOY = '/apis/apps/v1/namespaces/kube-system/deployments/coredns';
function deployment(image: string, more: Json = {}): Json {
  const labels = { 'k8s-app': 'kube-dns' };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'coredns', namespace: 'kube-system', labels },
    spec: { replicas: 2, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'coredns', image }] } }, ...more },
  };
}

async function eventually<T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 3_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v) || Date.now() > until) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('discovery', () => {
  it('maps kinds to resources and scopes, in the legacy JSON documents', async () => {
    const core = await call('GET', '/api/v1');
    expect(core.status).toBe(200);
    expect(core.body).toMatchObject({ kind: 'APIResourceList', groupVersion: 'v1' });
    expect(core.body.apiVersion).toBeUndefined();
    const byName = (list: Json, name: string): Json => list.resources.find((r: Json) => r.name === name);
    expect(byName(core.body, 'namespaces')).toMatchObject({ singularName: 'namespace', namespaced: false, kind: 'Namespace' });
    expect(byName(core.body, 'configmaps')).toMatchObject({ namespaced: true, kind: 'ConfigMap', shortNames: ['cm'] });
    expect(byName(core.body, 'configmaps').verbs).toEqual(expect.arrayContaining(['get', 'list', 'patch', 'delete']));
    for (const r of ['secrets', 'services', 'serviceaccounts', 'endpoints', 'pods', 'nodes']) expect(byName(core.body, r), r).toBeDefined();
    expect(byName(core.body, 'pods/eviction')).toMatchObject({ group: 'policy', version: 'v1', kind: 'Eviction', verbs: ['create'] });

    const groups = await call('GET', '/apis');
    const names = groups.body.groups.map((g: Json) => g.name);
    expect(names).toEqual(expect.arrayContaining(['apps', 'rbac.authorization.k8s.io', 'apiextensions.k8s.io', 'policy', 'admissionregistration.k8s.io']));
    expect(names).not.toContain('metrics.k8s.io');
    expect(groups.body.groups.find((g: Json) => g.name === 'apps').preferredVersion).toEqual({ groupVersion: 'apps/v1', version: 'v1' });

    const apps = await call('GET', '/apis/apps/v1');
    expect(apps.body).toMatchObject({ kind: 'APIResourceList', apiVersion: 'v1', groupVersion: 'apps/v1' });
    expect(byName(apps.body, 'daemonsets')).toMatchObject({ namespaced: true, kind: 'DaemonSet', singularName: 'daemonset' });
    const rbac = await call('GET', '/apis/rbac.authorization.k8s.io/v1');
    expect(byName(rbac.body, 'clusterrolebindings')).toMatchObject({ namespaced: false, kind: 'ClusterRoleBinding' });
    expect(byName(rbac.body, 'rolebindings')).toMatchObject({ namespaced: true });
    expect((await call('GET', '/apis/apps')).body).toMatchObject({ kind: 'APIGroup', name: 'apps' });

    const missing = await call('GET', '/apis/example.com/v1');
    expect(missing).toMatchObject({ status: 404, body: { kind: 'Status', reason: 'NotFound' } });
  });

  it('lists what setResource and metrics serve, and forgets them when they stop', async () => {
    const api = { group: 'scheduling.k8s.io', version: 'v1alpha2', resource: 'workloads', kind: 'Workload' };
    sim.setResource(api, [{ namespace: 'batch', name: 'train' }, { namespace: 'batch', name: 'eval' }]);
    sim.setMetrics(true);
    const groups = (await call('GET', '/apis')).body.groups;
    const scheduling = groups.find((g: Json) => g.name === 'scheduling.k8s.io');
    // The built-in v1 stays the preferred version beside the alpha.
    expect(scheduling.versions.map((v: Json) => v.version)).toEqual(['v1', 'v1alpha2']);
    expect(scheduling.preferredVersion.version).toBe('v1');
    expect(groups.map((g: Json) => g.name)).toContain('metrics.k8s.io');
    expect((await call('GET', '/apis/scheduling.k8s.io/v1alpha2')).body.resources).toEqual([expect.objectContaining({ name: 'workloads', kind: 'Workload', namespaced: true })]);
    const list = await call('GET', '/apis/scheduling.k8s.io/v1alpha2/workloads');
    expect(list.body.kind).toBe('WorkloadList');
    expect(list.body.items.map((o: Json) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`)).toEqual(['Workload/batch/eval', 'Workload/batch/train']);
    expect((await call('GET', '/apis/scheduling.k8s.io/v1alpha2/namespaces/batch/workloads/train')).body.metadata.name).toBe('train');

    sim.setResource(api, undefined);
    sim.setMetrics('unavailable');
    expect((await call('GET', '/apis/scheduling.k8s.io/v1alpha2/workloads')).status).toBe(404);
    expect((await call('GET', '/apis/scheduling.k8s.io/v1alpha2')).status).toBe(404);
    expect((await call('GET', '/apis/metrics.k8s.io/v1beta1')).status).toBe(503);
  });
});

describe('server-side apply', () => {
  it('creates with server-set metadata, leaves an unchanged object alone, bumps generation only when the spec changes', async () => {
    const yaml = [
      'apiVersion: apps/v1',
      'kind: Deployment',
      'metadata:',
      '  name: coredns',
      '  namespace: kube-system',
      '  labels: {k8s-app: kube-dns}',
      '  creationTimestamp: null',
      'spec:',
      '  replicas: 2',
      '  selector: {matchLabels: {k8s-app: kube-dns}}',
      '  template:',
      '    metadata: {labels: {k8s-app: kube-dns}}',
      '    spec:',
      '      containers:',
      '        - name: coredns',
      '          image: coredns:1.12.0',
    ].join('\n');
    const created = await apply(DEPLOY, 'rezus', yaml);
    expect(created.status).toBe(201);
    const meta = created.body.metadata;
    expect(meta).toMatchObject({ name: 'coredns', namespace: 'kube-system', generation: 1, labels: { 'k8s-app': 'kube-dns' } });
    expect(meta.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(meta.resourceVersion).toMatch(/^\d+$/);
    expect(meta.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(meta.managedFields).toHaveLength(1);
    expect(meta.managedFields[0]).toMatchObject({ manager: 'rezus', operation: 'Apply', apiVersion: 'apps/v1', fieldsType: 'FieldsV1' });
    expect(meta.managedFields[0].fieldsV1['f:spec']['f:template']['f:spec']['f:containers']['k:{"name":"coredns"}']).toEqual({ '.': {}, 'f:name': {}, 'f:image': {} });
    expect((await call('GET', DEPLOY)).body).toEqual(created.body);

    // The same configuration again, as JSON: nothing moves, not even managedFields' time.
    const again = await apply(DEPLOY, 'rezus', deployment('coredns:1.12.0'));
    expect(again.status).toBe(200);
    expect(again.body.metadata).toEqual(meta);

    const relabelled = await apply(DEPLOY, 'rezus', { ...deployment('coredns:1.12.0'), metadata: { name: 'coredns', namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns', tier: 'dns' } } });
    expect(Number(relabelled.body.metadata.resourceVersion)).toBeGreaterThan(Number(meta.resourceVersion));
    expect(relabelled.body.metadata.generation).toBe(1);

    const bumped = await apply(DEPLOY, 'rezus', deployment('coredns:1.12.1'));
    expect(bumped.body.metadata.generation).toBe(2);
    expect(bumped.body.spec.template.spec.containers[0].image).toBe('coredns:1.12.1');
    // Dropping the label it applied removes it.
    expect(bumped.body.metadata.labels).toEqual({ 'k8s-app': 'kube-dns' });
    expect(sim.object('apps/v1', 'Deployment', 'kube-system', 'coredns')).toEqual(bumped.body);
  });

  it('refuses to change a field another manager owns until forced, and removes only what the applier dropped', async () => {
    const path = '/api/v1/namespaces/default/configmaps/settings';
    sim.putObject({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'default' }, data: { a: '1', b: '2' } });
    const cm = (data: Record<string, string>): Json => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'default' }, data });

    const refused = await apply(path, 'rezus', cm({ a: '9' }));
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      kind: 'Status',
      status: 'Failure',
      reason: 'Conflict',
      code: 409,
      message: 'Apply failed with 1 conflict: conflict with "talos": .data.a',
      details: { causes: [{ reason: 'FieldManagerConflict', message: 'conflict with "talos"', field: '.data.a' }] },
    });
    expect((sim.object('v1', 'ConfigMap', 'default', 'settings') as Json).data).toEqual({ a: '1', b: '2' });

    // Applying the live value shares the field; a new one is the applier's alone.
    expect((await apply(path, 'rezus', cm({ a: '1', c: '3' }))).status).toBe(200);
    const forced = await apply(path, 'rezus', cm({ a: '9', c: '3' }), '&force=true');
    expect(forced.status).toBe(200);
    expect(forced.body.data).toEqual({ a: '9', b: '2', c: '3' });
    const owners = Object.fromEntries(forced.body.metadata.managedFields.map((e: Json) => [e.manager, Object.keys(e.fieldsV1['f:data']).sort()]));
    expect(owners).toEqual({ talos: ['f:b'], rezus: ['f:a', 'f:c'] });

    const dropped = await apply(path, 'rezus', cm({ a: '9' }));
    expect(dropped.body.data).toEqual({ a: '9', b: '2' });
  });

  it('checks its options, the object against the path and the namespace, as the apiserver does', async () => {
    const path = '/api/v1/namespaces/apps/configmaps/x';
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'apps' }, data: { k: 'v' } };

    const noManager = await call('PATCH', path, { body: cm, contentType: APPLY });
    expect(noManager.status).toBe(422);
    expect(noManager.body).toMatchObject({ reason: 'Invalid', message: 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch' });

    const noNamespace = await apply(path, 'rezus', cm);
    expect(noNamespace.status).toBe(404);
    expect(noNamespace.body).toMatchObject({ reason: 'NotFound', message: 'namespaces "apps" not found', details: { name: 'apps', kind: 'namespaces' } });
    const ns = await apply('/api/v1/namespaces/apps', 'rezus', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'apps' } });
    expect(ns.status).toBe(201);
    expect(ns.body.status).toEqual({ phase: 'Active' });
    expect((await apply(path, 'rezus', cm)).status).toBe(201);

    const renamed = await apply(path, 'rezus', { ...cm, metadata: { name: 'y', namespace: 'apps' } });
    expect(renamed).toMatchObject({ status: 400, body: { reason: 'BadRequest', message: 'the name of the object (y) does not match the name on the URL (x)' } });
    const elsewhere = await apply(path, 'rezus', { ...cm, metadata: { name: 'x', namespace: 'default' } });
    expect(elsewhere.status).toBe(400);
    const wrongKind = await apply(path, 'rezus', { ...cm, kind: 'Secret' });
    expect(wrongKind.body).toMatchObject({ reason: 'BadRequest', message: 'invalid object type: /v1, Kind=Secret' });
    const notYaml = await call('PATCH', `${path}?fieldManager=rezus`, { body: 'a: [b', contentType: APPLY });
    expect(notYaml.status).toBe(400);
    expect(notYaml.body.message).toMatch(/^error decoding YAML: /);
    const plainJson = await call('PATCH', `${path}?fieldManager=rezus`, { body: cm, contentType: 'application/json' });
    expect(plainJson).toMatchObject({ status: 415, body: { reason: 'UnsupportedMediaType' } });

    const stranger = await issueClientCert(ca, { cn: 'dev', org: 'developers' });
    expect((await call('PATCH', `${path}?fieldManager=dev`, { body: cm, contentType: APPLY, cert: stranger })).status).toBe(403);
  });

  it('a dry run answers the would-be object and stores nothing', async () => {
    const path = '/api/v1/namespaces/default/serviceaccounts/robot';
    const before = sim.writes.length;
    const dry = await apply(path, 'rezus', { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'robot', namespace: 'default' } }, '&dryRun=All');
    expect(dry.status).toBe(201);
    expect(dry.body.metadata.name).toBe('robot');
    expect((await call('GET', path)).status).toBe(404);
    expect(sim.objects('ServiceAccount')).toEqual([]);
    // A dry run is still a write the server answered.
    expect(sim.writes.slice(before).map((w) => w.method)).toEqual(['PATCH']);
  });

  it('applies and serves a CustomResourceDefinition as a new resource', async () => {
    const crd = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'widgets.example.com' },
      spec: {
        group: 'example.com',
        scope: 'Namespaced',
        names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
        versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }],
      },
    };
    const created = await apply('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com', 'rezus', crd);
    expect(created.status).toBe(201);
    expect(created.body.status.conditions).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'Established', status: 'True' })]));
    expect((await call('GET', '/apis/example.com/v1')).body.resources).toEqual([expect.objectContaining({ name: 'widgets', kind: 'Widget', namespaced: true })]);

    const path = '/apis/example.com/v1/namespaces/default/widgets/w1';
    const widget = await apply(path, 'rezus', { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w1', namespace: 'default' }, spec: { size: 3 } });
    expect(widget.status).toBe(201);
    expect(widget.body.metadata.generation).toBe(1);
    expect((await call('GET', '/apis/example.com/v1/widgets')).body.items.map((w: Json) => [w.kind, w.metadata.name])).toEqual([['Widget', 'w1']]);
    // Custom resources take no strategic merge patch, like the apiserver's.
    expect((await call('PATCH', path, { body: { spec: { size: 4 } }, contentType: 'application/strategic-merge-patch+json' })).status).toBe(415);

    expect((await call('DELETE', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com')).status).toBe(200);
    expect((await call('GET', path)).status).toBe(404);
    expect((await call('GET', '/apis')).body.groups.map((g: Json) => g.name)).not.toContain('example.com');
  });
});

describe('delete', () => {
  it('answers a Success Status and the object is gone, namespaced or cluster-scoped', async () => {
    const path = '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kube-proxy';
    const crb = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'kube-proxy' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:node-proxier' },
      subjects: [{ kind: 'ServiceAccount', name: 'kube-proxy', namespace: 'kube-system' }],
    };
    const created = await apply(path, 'rezus', crb);
    expect(created.status).toBe(201);
    expect(created.body.metadata.namespace).toBeUndefined();
    expect((await call('GET', path)).body.roleRef.name).toBe('system:node-proxier');
    expect((await call('GET', '/apis/rbac.authorization.k8s.io/v1/namespaces/default/clusterrolebindings/kube-proxy')).status).toBe(404);

    expect((await call('DELETE', `${path}?propagationPolicy=Sideways`)).status).toBe(422);
    const deleted = await call('DELETE', `${path}?propagationPolicy=Background`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ kind: 'Status', status: 'Success', details: { name: 'kube-proxy', group: 'rbac.authorization.k8s.io', kind: 'clusterrolebindings', uid: created.body.metadata.uid } });
    const gone = await call('GET', path);
    expect(gone).toMatchObject({ status: 404, body: { reason: 'NotFound', message: 'clusterrolebindings.rbac.authorization.k8s.io "kube-proxy" not found' } });
    expect((await call('DELETE', path, { body: { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Foreground' } })).status).toBe(404);
    expect(sim.writes.filter((w) => w.path === path).map((w) => w.method)).toEqual(['PATCH', 'DELETE', 'DELETE', 'DELETE']);

    await apply('/api/v1/namespaces/default/configmaps/c', 'rezus', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, data: {} });
    expect((await call('DELETE', '/api/v1/namespaces/default/configmaps/c')).status).toBe(200);
    expect(sim.object('v1', 'ConfigMap', 'default', 'c')).toBeUndefined();
    expect((await call('DELETE', '/api/v1/namespaces/kube-system')).status).toBe(403);
  });
});

describe('rollouts', () => {
  const status = async (): Promise<Json> => (await call('GET', DEPLOY)).body.status;
  const condition = (s: Json, type: string): Json => s.conditions.find((c: Json) => c.type === type);

  it('a Deployment reports its new spec rolled out after setRollout ms, and never when stuck', async () => {
    sim.setRollout({ ms: 150 });
    const created = await apply(DEPLOY, 'rezus', deployment('coredns:1.12.0', { progressDeadlineSeconds: 1 }));
    expect(created.body.status).toMatchObject({ observedGeneration: 1, replicas: 2, unavailableReplicas: 2 });
    const settled = await eventually(status, (s) => s.availableReplicas === 2);
    expect(settled).toMatchObject({ observedGeneration: 1, replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 });
    expect(condition(settled, 'Available')).toMatchObject({ status: 'True', reason: 'MinimumReplicasAvailable' });
    expect(condition(settled, 'Progressing')).toMatchObject({ status: 'True', reason: 'NewReplicaSetAvailable' });

    const changed = await apply(DEPLOY, 'rezus', deployment('coredns:1.12.1', { progressDeadlineSeconds: 1 }));
    expect(changed.body.metadata.generation).toBe(2);
    // Zero counts are left out, as the controller's omitempty fields are.
    expect(changed.body.status.updatedReplicas).toBeUndefined();
    expect(changed.body.status).toMatchObject({ observedGeneration: 2, replicas: 2, unavailableReplicas: 2 });
    expect(condition(changed.body.status, 'Available')).toMatchObject({ status: 'False', reason: 'MinimumReplicasUnavailable' });
    expect(condition(changed.body.status, 'Progressing')).toMatchObject({ status: 'True', reason: 'ReplicaSetUpdated' });
    const rolled = await eventually(status, (s) => s.updatedReplicas === 2);
    expect(rolled).toMatchObject({ observedGeneration: 2, updatedReplicas: 2, availableReplicas: 2 });
    expect(Number((await call('GET', DEPLOY)).body.metadata.resourceVersion)).toBeGreaterThan(Number(changed.body.metadata.resourceVersion));

    sim.setRollout({ stuck: true });
    await apply(DEPLOY, 'rezus', deployment('coredns:9.9.9', { progressDeadlineSeconds: 1 }));
    await new Promise((r) => setTimeout(r, 300));
    expect(await status()).toMatchObject({ observedGeneration: 3, unavailableReplicas: 2 });
    expect((await status()).updatedReplicas).toBeUndefined();
    const timedOut = await eventually(status, (s) => condition(s, 'Progressing').status === 'False');
    expect(condition(timedOut, 'Progressing')).toMatchObject({ status: 'False', reason: 'ProgressDeadlineExceeded' });
  });

  it('apply and strategic merge patch change the same DaemonSet setDaemonSet seeded', async () => {
    sim.setDaemonSet({ namespace: 'kube-system', name: 'kube-proxy', container: 'kube-proxy', image: 'kube-proxy:v1.36.3', desired: 3 });
    const path = '/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy';
    const seeded = (await call('GET', path)).body;
    expect(seeded.metadata.managedFields).toEqual([expect.objectContaining({ manager: 'talos', operation: 'Apply' })]);
    expect(seeded.status).toMatchObject({ desiredNumberScheduled: 3, currentNumberScheduled: 3, updatedNumberScheduled: 3, numberReady: 3, numberAvailable: 3, observedGeneration: 1 });

    const ds = (image: string): Json => ({
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'kube-proxy', namespace: 'kube-system', labels: { 'k8s-app': 'kube-proxy' } },
      spec: { selector: { matchLabels: { 'k8s-app': 'kube-proxy' } }, template: { metadata: { labels: { 'k8s-app': 'kube-proxy' } }, spec: { containers: [{ name: 'kube-proxy', image, command: ['/usr/local/bin/kube-proxy'] }] } } },
    });
    const refused = await apply(path, 'rezus', ds('kube-proxy:v1.37.0'));
    expect(refused.status).toBe(409);
    expect(refused.body.details.causes).toEqual([{ reason: 'FieldManagerConflict', message: 'conflict with "talos"', field: '.spec.template.spec.containers[name="kube-proxy"].image' }]);
    expect(sim.daemonSet('kube-system', 'kube-proxy')?.image).toBe('kube-proxy:v1.36.3');

    sim.setRollout({ ms: 100 });
    expect((await apply(path, 'rezus', ds('kube-proxy:v1.37.0'), '&force=true')).status).toBe(200);
    expect(sim.daemonSet('kube-system', 'kube-proxy')).toMatchObject({ image: 'kube-proxy:v1.37.0', generation: 2, observedGeneration: 2, desired: 3, updated: 0, available: 0 });
    await eventually(async () => sim.daemonSet('kube-system', 'kube-proxy'), (d) => d?.available === 3);
    expect(sim.daemonSet('kube-system', 'kube-proxy')).toMatchObject({ updated: 3, available: 3 });

    // The Kubernetes upgrade's patch, with no fieldManager: the User-Agent names the updater.
    const body = { spec: { template: { spec: { containers: [{ name: 'kube-proxy', image: 'kube-proxy:v1.37.1' }] } } } };
    const patched = await call('PATCH', path, { body, contentType: 'application/strategic-merge-patch+json', userAgent: 'kubectl/v1.36.0 (linux/amd64) kubernetes/abc' });
    expect(patched.status).toBe(200);
    expect(sim.daemonSet('kube-system', 'kube-proxy')).toMatchObject({ image: 'kube-proxy:v1.37.1', generation: 3 });
    // Merged by name: the container kept everything else, and the updater now owns just its image.
    expect(patched.body.spec.template.spec.containers).toEqual([{ name: 'kube-proxy', image: 'kube-proxy:v1.37.1', command: ['/usr/local/bin/kube-proxy'] }]);
    const again = await apply(path, 'rezus', ds('kube-proxy:v1.37.0'));
    expect(again.body.message).toBe('Apply failed with 1 conflict: conflict with "kubectl" using apps/v1: .spec.template.spec.containers[name="kube-proxy"].image');
    expect(sim.writes.filter((w) => w.path === path).map((w) => w.method)).toEqual(['PATCH', 'PATCH', 'PATCH', 'PATCH']);
  });

  it('a DaemonSet applied from scratch schedules one pod per node', async () => {
    const path = '/apis/apps/v1/namespaces/kube-system/daemonsets/flannel';
    const created = await apply(path, 'rezus', {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'flannel', namespace: 'kube-system' },
      spec: { selector: { matchLabels: { app: 'flannel' } }, template: { metadata: { labels: { app: 'flannel' } }, spec: { containers: [{ name: 'flannel', image: 'flannel:v0.27' }] } } },
    });
    expect(created.body.status).toMatchObject({ desiredNumberScheduled: 2, numberAvailable: 2, updatedNumberScheduled: 2, observedGeneration: 1 });
  });
});
