// The bootstrap-manifest sync (POST /v1/clusters/:id/sync-manifests, and the last step of a
// Kubernetes upgrade) against Talos sims that list the manifests their configs render (COSI
// State/List over mTLS) and a kube sim that serves discovery and server-side apply.
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { clusters, machines } from '../db/schema/index.ts';
import type { Deps } from '../functions/context.ts';
import { syncManifestsJob } from '../functions/manifests/job.ts';
import { pushConfigJob } from '../functions/push-config/job.ts';
import { loadKubernetesClient } from '../lib/kube/index.ts';
import { syncManifestsExecutor } from '../runner/jobs/manifests/executor.ts';
import { syncManifests } from '../runner/jobs/manifests/sync.ts';
import type { ClusterAccess } from '../runner/jobs/cluster-access.ts';
import { openKubeWriter, type KubeWriter } from '../lib/kube/drain.ts';
import { transportError } from '../lib/kube/errors.ts';
import { MANIFEST_TYPE, MANIFESTS_NAMESPACE } from '../lib/talos/manifests.ts';
import { issueClientCert } from './sim/kube/certs.ts';
import { kubeconfigFor } from './sim/kube/kubeconfig.ts';
import { startKubeSim, type KubeSim } from './sim/kube/server.ts';
import { pushConfigExecutor } from '../runner/jobs/push-config/executor.ts';
import { bind } from '../runner/jobs/registry.ts';
import { createWorker } from '../runner/worker.ts';
import { linkKubeToTalos } from './sim/kube/talos-link.ts';
import type { Json } from './support/api-caller.ts';
import { alertOf, FormClient } from './support/dashboard-client.ts';
import { createHarness, finishedRun, sharedSecrets, type Harness } from './support/harness.ts';
import { fleet, startUpgradeCluster, stoppedAfterEach, type UpgradeCluster } from './support/upgrade-cluster.ts';

const INVENTORY = 'talos-bootstrap-manifests-inventory';
const OWNER = 'config.k8s.io/owning-inventory';

const started = stoppedAfterEach();

/** An inline manifest listing a custom resource, a ConfigMap, their Namespace and the CRD, in that order. */
const WIDGETS = [
  'apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: apps\nspec:\n  size: 3',
  'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: apps\ndata:\n  a: b',
  'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps',
  [
    'apiVersion: apiextensions.k8s.io/v1',
    'kind: CustomResourceDefinition',
    'metadata:\n  name: widgets.example.com',
    'spec:\n  group: example.com\n  scope: Namespaced',
    '  names:\n    plural: widgets\n    singular: widget\n    kind: Widget\n    listKind: WidgetList',
    '  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true',
  ].join('\n'),
].join('\n---\n');

async function setup(opts: { manifestWaitMs?: number; bootstrapped?: boolean } = {}): Promise<{ h: Harness; c: UpgradeCluster }> {
  const h = (started.h = await createHarness({
    patchDeps: (d: Deps) => {
      d.settings.upgrade = { pollMs: 20, callDeadlineMs: 2_000, kubeDeadlineMs: 2_000, manifestWaitMs: opts.manifestWaitMs ?? 2_000 };
    },
  }));
  const c = (started.cluster = await startUpgradeCluster(h, { talosVersion: 'v1.14.0', machines: fleet(2, 1) }));
  started.link = linkKubeToTalos(c.kube, c.sims, { restartMs: 20 });
  if (opts.bootstrapped !== false) await h.deps.db.update(clusters).set({ bootstrappedAt: Date.now() }).where(eq(clusters.id, c.clusterId));
  await loadKubernetesClient();
  started.worker = createWorker({ deps: h.deps, executors: Object.fromEntries([bind(syncManifestsJob, syncManifestsExecutor), bind(pushConfigJob, pushConfigExecutor)]), workerId: 'test', leaseMs: 5_000, concurrency: 1, pollMs: 20 });
  started.worker.start();
  return { h, c };
}

async function sync(hh: Harness, c: UpgradeCluster, body?: Json): Promise<{ run: Json; events: Json[] }> {
  const res = await hh.call('POST', `/v1/clusters/${c.clusterId}/sync-manifests`, body === undefined ? {} : { body });
  expect(res.status).toBe(202);
  expect(res.body.run.kind).toBe('sync-manifests');
  const run = await finishedRun(hh, res.body.run.id);
  const events = (await hh.call('GET', `/v1/runs/${run.id}/events`)).body.events as Json[];
  return { run, events };
}

const applied = (events: Json[]): Record<string, string> => Object.fromEntries(events.filter((e) => e.type === 'manifests.apply').map((e) => [e.data.object, e.data.action]));
const inventoryKeys = (c: UpgradeCluster): string[] | undefined => {
  const cm = c.kube.object('v1', 'ConfigMap', 'kube-system', INVENTORY) as { data?: Record<string, string> } | undefined;
  return cm ? Object.keys(cm.data ?? {}).sort() : undefined;
};

describe('bootstrap-manifest sync', () => {
  it('applies every manifest a control plane renders as field manager talos, records them in the inventory, and a second sync changes nothing', async () => {
    const { h, c } = await setup();
    const first = await sync(h, c);
    expect(first.run.error).toBeNull();
    expect(first.run.state).toBe('succeeded');
    const actions = applied(first.events);
    // kube-proxy existed (Talos deployed it at bootstrap): adopted and configured; the rest is new.
    expect(actions['DaemonSet.apps kube-system/kube-proxy']).toBe('configured');
    expect(actions['Deployment.apps kube-system/coredns']).toBe('created');
    expect(Object.values(actions).filter((a) => a === 'created').length).toBeGreaterThan(5);

    const coredns = c.kube.object('apps/v1', 'Deployment', 'kube-system', 'coredns') as Json;
    expect(coredns.metadata.annotations[OWNER]).toBe(INVENTORY);
    expect(coredns.metadata.managedFields.map((f: Json) => f.manager)).toContain('talos');
    const keys = inventoryKeys(c)!;
    expect(keys).toContain('kube-system_kube-proxy_apps_DaemonSet');
    expect(keys).toContain('kube-system_coredns_apps_Deployment');
    expect(keys).toHaveLength(Object.keys(actions).length);

    const done = first.events.find((e) => e.type === 'manifests.done');
    expect(done.data).toMatchObject({ source: 'cp1', dryRun: false, deleted: 0, unchanged: 0 });
    expect(done.data.created + done.data.configured).toBe(keys.length);
    expect(first.events.some((e) => e.type === 'manifests.ready' && e.data.object === 'Deployment.apps kube-system/coredns')).toBe(true);

    // The manifests carry the cluster's bootstrap token: its secret half reaches no event (the id
    // half is public: it names the Secret, bootstrap-token-<id>).
    const [tokenId, tokenSecret] = (await sharedSecrets()).bootstrapToken.split('.') as [string, string];
    const bootstrapSecret = c.kube.object('v1', 'Secret', 'kube-system', `bootstrap-token-${tokenId}`) as Json;
    expect(Buffer.from(bootstrapSecret.data['token-secret'], 'base64').toString()).toBe(tokenSecret);
    expect(JSON.stringify(first.events)).not.toContain(tokenSecret);
    expect(JSON.stringify(first.events)).not.toContain(bootstrapSecret.data['token-secret']);
    // What the adoption changed is reported by path: the owner annotation it added, among others.
    const adopted = first.events.find((e) => e.type === 'manifests.apply' && e.data.object === 'DaemonSet.apps kube-system/kube-proxy');
    expect(adopted.data.fields).toContainEqual({ path: `metadata.annotations[${JSON.stringify(OWNER)}]` });
    expect(first.run.result.changes.find((ch: Json) => ch.object === 'DaemonSet.apps kube-system/kube-proxy').fields).toContain(`metadata.annotations[${JSON.stringify(OWNER)}]`);

    const writes = c.kube.writes.length;
    const second = await sync(h, c);
    expect(second.run.state).toBe('succeeded');
    expect(new Set(Object.values(applied(second.events)))).toEqual(new Set(['unchanged']));
    expect(second.events.find((e) => e.type === 'manifests.done').data).toMatchObject({ created: 0, configured: 0, deleted: 0, unchanged: keys.length });
    expect(second.events.some((e) => e.type === 'manifests.wait')).toBe(false);
    // Unchanged applies and the inventory rewrite are writes, but no object moved.
    expect(c.kube.writes.length).toBeGreaterThan(writes);
    expect((c.kube.object('apps/v1', 'Deployment', 'kube-system', 'coredns') as Json).metadata.resourceVersion).toBe(coredns.metadata.resourceVersion);
  });

  it('a dry run reports what would change and stores nothing', async () => {
    const { h, c } = await setup();
    const before = c.kube.objects().length;
    const { run, events } = await sync(h, c, { dryRun: true });
    expect(run.state).toBe('succeeded');
    const actions = applied(events);
    expect(actions['Deployment.apps kube-system/coredns']).toBe('created');
    expect(events.every((e) => e.type !== 'manifests.apply' || e.message.startsWith('would be '))).toBe(true);
    expect(c.kube.objects().length).toBe(before);
    expect(inventoryKeys(c)).toBeUndefined();
    expect(events.find((e) => e.type === 'manifests.done').message).toContain('dry run: nothing changed');
  });

  it('reports the fields a sync changes by path, with a container image\'s values, never a Secret\'s', async () => {
    const { h, c } = await setup();
    expect((await sync(h, c)).run.state).toBe('succeeded');
    // Someone changes kube-proxy's image and the bootstrap token by hand.
    const ds = structuredClone(c.kube.object('apps/v1', 'DaemonSet', 'kube-system', 'kube-proxy')) as Json;
    const rendered = ds.spec.template.spec.containers[0].image as string;
    ds.spec.template.spec.containers[0].image = 'registry.example/kube-proxy:hand-made';
    c.kube.putObject(ds, { manager: 'kubectl', operation: 'Update' });
    const [tokenId, tokenSecret] = (await sharedSecrets()).bootstrapToken.split('.') as [string, string];
    const secret = structuredClone(c.kube.object('v1', 'Secret', 'kube-system', `bootstrap-token-${tokenId}`)) as Json;
    const handMade = Buffer.from('handmade00000000').toString('base64');
    secret.data['token-secret'] = handMade;
    c.kube.putObject(secret, { manager: 'kubectl', operation: 'Update' });

    const image = { path: 'spec.template.spec.containers[0].image', from: 'registry.example/kube-proxy:hand-made', to: rendered };
    for (const dryRun of [true, false]) {
      const { run, events } = await sync(h, c, { dryRun });
      expect(run.state).toBe('succeeded');
      const event = (object: string) => events.find((e) => e.type === 'manifests.apply' && e.data.object === object);
      const proxy = event('DaemonSet.apps kube-system/kube-proxy');
      expect(proxy.data).toMatchObject({ action: 'configured', fields: [image], moreFields: 0 });
      expect(proxy.message).toBe(`${dryRun ? 'would be ' : ''}configured: DaemonSet.apps kube-system/kube-proxy (10-kube-proxy); ${image.path} ${image.from} → ${image.to}`);
      const token = event(`Secret kube-system/bootstrap-token-${tokenId}`);
      expect(token.data).toMatchObject({ action: 'configured', fields: [{ path: 'data.token-secret' }] });
      expect(token.message).toMatch(/; data\.token-secret$/);
      for (const value of [tokenSecret, Buffer.from(tokenSecret).toString('base64'), handMade, 'handmade00000000']) expect(JSON.stringify(events)).not.toContain(value);
      expect(Object.values(applied(events)).filter((a) => a === 'configured')).toHaveLength(2);
      const live = c.kube.object('apps/v1', 'DaemonSet', 'kube-system', 'kube-proxy') as Json;
      expect(live.spec.template.spec.containers[0].image).toBe(dryRun ? image.from : rendered);
    }
  });

  it('prunes what an earlier sync applied and no manifest names any more, and refuses to touch another inventory\'s objects', async () => {
    const { h, c } = await setup();
    expect((await sync(h, c)).run.state).toBe('succeeded');
    // An object an earlier sync applied (an inline manifest since removed), and one another tool's inventory owns.
    c.kube.putObject({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'gone', namespace: 'kube-system', annotations: { [OWNER]: INVENTORY } }, data: { a: '1' } }, { manager: 'talos' });
    c.kube.putObject({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'theirs', namespace: 'default', annotations: { [OWNER]: 'flux-system' } }, data: { a: '1' } }, { manager: 'flux' });
    const keys = inventoryKeys(c)!;
    // Written whole, as talosctl's sync writes it (an update, not an apply).
    c.kube.putObject({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: INVENTORY, namespace: 'kube-system' }, data: Object.fromEntries([...keys, 'kube-system_gone__ConfigMap', 'default_theirs__ConfigMap', 'kube-system_never-created__ConfigMap'].map((k) => [k, ''])) }, { manager: 'talosctl', operation: 'Update' });

    const refused = await sync(h, c);
    expect(refused.run.state).toBe('failed');
    expect(refused.run.error).toBe('not pruned: ConfigMap default/theirs belongs to inventory flux-system (policy AdoptIfNoInventory)');
    expect(c.kube.object('v1', 'ConfigMap', 'kube-system', 'gone')).toBeUndefined();
    expect(c.kube.object('v1', 'ConfigMap', 'default', 'theirs')).toBeDefined();
    expect(refused.events.filter((e) => e.type === 'manifests.prune').map((e) => e.data.object)).toEqual(['ConfigMap kube-system/gone']);
    // What was deleted, and what never existed, left the inventory; the refused one stays in it.
    expect(inventoryKeys(c)).toEqual([...keys, 'default_theirs__ConfigMap'].sort());

    // prune: false leaves it alone and succeeds.
    const kept = await sync(h, c, { prune: false });
    expect(kept.run.state).toBe('succeeded');
    expect(kept.events.some((e) => e.type === 'manifests.prune')).toBe(false);

    // The AdoptAll policy prunes it all the same.
    const adopting = await sync(h, c, { inventoryPolicy: 'AdoptAll' });
    expect(adopting.run.state).toBe('succeeded');
    expect(adopting.events.filter((e) => e.type === 'manifests.prune').map((e) => e.data.object)).toEqual(['ConfigMap default/theirs']);
    expect(c.kube.object('v1', 'ConfigMap', 'default', 'theirs')).toBeUndefined();
    expect(inventoryKeys(c)).toEqual(keys);
  });

  it('refuses, before applying anything, an object its inventory policy does not let it take over', async () => {
    const { h, c } = await setup();
    const selector = { matchLabels: { 'k8s-app': 'kube-dns' } };
    c.kube.putObject({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'coredns', namespace: 'kube-system', annotations: { [OWNER]: 'argo' } }, spec: { replicas: 1, selector } }, { manager: 'argo' });
    const writes = c.kube.writes.length;
    const { run, events } = await sync(h, c);
    expect(run.state).toBe('failed');
    expect(run.error).toBe('refusing to sync the bootstrap manifests: Deployment.apps kube-system/coredns belongs to inventory argo (policy AdoptIfNoInventory)');
    expect(c.kube.writes.length).toBe(writes);
    expect(inventoryKeys(c)).toBeUndefined();
    expect(events.some((e) => e.type === 'manifests.apply')).toBe(false);

    // MustMatch takes over nothing it did not apply itself: not even kube-proxy, which Talos
    // deployed at bootstrap and no inventory owns yet.
    const strict = await sync(h, c, { inventoryPolicy: 'MustMatch' });
    expect(strict.run.error).toBe(
      'refusing to sync the bootstrap manifests: DaemonSet.apps kube-system/kube-proxy belongs to no inventory (policy MustMatch); Deployment.apps kube-system/coredns belongs to inventory argo (policy MustMatch)',
    );
    expect(c.kube.writes.length).toBe(writes);

    // AdoptAll takes it over.
    const adopting = await sync(h, c, { inventoryPolicy: 'AdoptAll' });
    expect(adopting.run.state).toBe('succeeded');
    expect(applied(adopting.events)['Deployment.apps kube-system/coredns']).toBe('configured');
    expect((c.kube.object('apps/v1', 'Deployment', 'kube-system', 'coredns') as Json).metadata.annotations[OWNER]).toBe(INVENTORY);
    expect(adopting.run.params).toEqual({ inventoryPolicy: 'AdoptAll' });
  });

  it('recreates an object whose immutable fields changed only when asked to, as talosctl --manifests-force does', async () => {
    const { h, c } = await setup();
    // kube-proxy as an older Talos deployed it, with a selector the manifests no longer have.
    const old = { 'k8s-app': 'kube-proxy' };
    c.kube.putObject({ apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'kube-proxy', namespace: 'kube-system', labels: old }, spec: { selector: { matchLabels: old }, template: { metadata: { labels: old }, spec: { containers: [{ name: 'kube-proxy', image: 'registry.k8s.io/kube-proxy:v1.35.0' }] } } } });
    const uid = (): string => (c.kube.object('apps/v1', 'DaemonSet', 'kube-system', 'kube-proxy') as Json).metadata.uid;
    const before = uid();

    const refused = await sync(h, c);
    expect(refused.run.state).toBe('failed');
    expect(refused.run.error).toMatch(/^applying DaemonSet\.apps kube-system\/kube-proxy \(manifest 10-kube-proxy\) failed: .*HTTP 422: DaemonSet\.apps "kube-proxy" is invalid: spec\.selector: .*field is immutable; a field that cannot change differs: sync with recreate \(talosctl --manifests-force\) to delete the object and create it again$/);
    expect(uid()).toBe(before);

    const preview = await sync(h, c, { recreate: true, dryRun: true });
    expect(preview.run.state).toBe('succeeded');
    const previewed = preview.events.find((e) => e.type === 'manifests.apply' && e.data.object === 'DaemonSet.apps kube-system/kube-proxy');
    expect(previewed.message).toBe('would be recreated: DaemonSet.apps kube-system/kube-proxy (10-kube-proxy); spec.selector cannot change in place');
    expect(uid()).toBe(before);

    const { run, events } = await sync(h, c, { recreate: true });
    expect(run.state).toBe('succeeded');
    expect(applied(events)['DaemonSet.apps kube-system/kube-proxy']).toBe('recreated');
    expect(events.find((e) => e.type === 'manifests.done').message).toMatch(/, 1 recreated, /);
    const live = c.kube.object('apps/v1', 'DaemonSet', 'kube-system', 'kube-proxy') as Json;
    expect(live.metadata.uid).not.toBe(before);
    expect(live.spec.selector.matchLabels).toEqual({ 'k8s-app': 'kube-proxy', tier: 'node' });
    expect(live.metadata.annotations[OWNER]).toBe(INVENTORY);
    expect(events.some((e) => e.type === 'manifests.ready' && e.data.object === 'DaemonSet.apps kube-system/kube-proxy')).toBe(true);
  });

  it('a rollout that never completes fails the run naming it, with the inventory written', async () => {
    const { h, c } = await setup({ manifestWaitMs: 300 });
    c.kube.setRollout({ stuck: true });
    const { run } = await sync(h, c);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^not ready within 0 s: .*Deployment\.apps kube-system\/coredns \(0 of \d+ updated, 0 available\)/);
    expect(inventoryKeys(c)).toContain('kube-system_coredns_apps_Deployment');
  });

  it('an apply that fails stops the sync naming the object, with everything it may have created already in the inventory', async () => {
    const { h, c } = await setup();
    // An inline manifest (applied last) into a namespace nothing creates: the server refuses it.
    const contents = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: orphan\n  namespace: nowhere\ndata:\n  a: b\n';
    for (const name of ['cp1', 'cp2']) {
      const id = c.machineIds.get(name)!;
      expect((await h.call('PATCH', `/v1/clusters/${c.clusterId}/machines/${id}`, { body: { patches: [{ cluster: { inlineManifests: [{ name: 'orphan', contents }] } }] } })).status).toBe(200);
      await push(h, c, name);
    }
    const { run, events } = await sync(h, c);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(/^applying ConfigMap nowhere\/orphan \(manifest 99-orphan\) failed: PATCH .*\/api\/v1\/namespaces\/nowhere\/configmaps\/orphan: HTTP 404: namespaces "nowhere" not found$/);
    // Written before the first apply, so whatever was created before the failure can be pruned
    // later: it holds the objects applied (the cluster-wide ones go first), the one refused, and
    // those never reached (ConfigMaps and Secrets go before the rest: CoreDNS's Deployment).
    const keys = inventoryKeys(c)!;
    const appliedFirst = events.filter((e) => e.type === 'manifests.apply').map((e) => e.data.object);
    expect(appliedFirst).toContain('ClusterRole.rbac.authorization.k8s.io system:coredns');
    expect(keys).toContain('_system__coredns_rbac.authorization.k8s.io_ClusterRole');
    expect(keys).toContain('nowhere_orphan__ConfigMap');
    expect(c.kube.object('apps/v1', 'Deployment', 'kube-system', 'coredns')).toBeUndefined();
    expect(keys).toContain('kube-system_coredns_apps_Deployment');
  });

  it('reads the manifests from the next control plane when the first cannot answer', async () => {
    const { h, c } = await setup();
    await c.sim('cp1').stop();
    const { run, events } = await sync(h, c);
    expect(run.state).toBe('succeeded');
    expect(events.find((e) => e.type === 'manifests.plan').data.source).toBe('cp2');
  });

  it('applies cluster-wide definitions first, whatever the manifest\'s order: a custom resource after its CRD, a ConfigMap after its Namespace', async () => {
    const { h, c } = await setup();
    const contents = WIDGETS;
    await patchControlPlanes(h, c, [{ cluster: { inlineManifests: [{ name: 'widgets', contents }] } }]);
    const preview = await sync(h, c, { dryRun: true });
    expect(preview.run.error).toBeNull();
    expect(applied(preview.events)['Widget.example.com apps/w1']).toBe('created');
    expect(c.kube.object('example.com/v1', 'Widget', 'apps', 'w1')).toBeUndefined();

    const { run, events } = await sync(h, c);
    expect(run.error).toBeNull();
    const order = events.filter((e) => e.type === 'manifests.apply' && e.data.manifest === '99-widgets').map((e) => e.data.object);
    expect(order).toEqual(['Namespace apps', 'CustomResourceDefinition.apiextensions.k8s.io widgets.example.com', 'ConfigMap apps/settings', 'Widget.example.com apps/w1']);
    expect((c.kube.object('example.com/v1', 'Widget', 'apps', 'w1') as Json).spec).toEqual({ size: 3 });
    expect(inventoryKeys(c)).toContain('apps_w1_example.com_Widget');
  });

  it('waits for what it changed to be ready by its status, whatever the kind, and fails at once on one that says it never will', async () => {
    const { h, c } = await setup({ manifestWaitMs: 5_000 });
    await patchControlPlanes(h, c, [{ cluster: { inlineManifests: [{ name: 'widgets', contents: WIDGETS }] } }]);
    expect((await sync(h, c)).run.state).toBe('succeeded');
    // Someone resizes the widget by hand; its operator has not caught up with that generation.
    const handEdit = (status: Json): number => {
      const w = structuredClone(c.kube.object('example.com/v1', 'Widget', 'apps', 'w1')) as Json;
      w.spec.size = 9;
      return (c.kube.putObject({ ...w, status }, { manager: 'kubectl', operation: 'Update' }) as Json).metadata.generation;
    };
    const generation = handEdit({ observedGeneration: 1 });

    const res = await h.call('POST', `/v1/clusters/${c.clusterId}/sync-manifests`, { body: {} });
    const runId = res.body.run.id as string;
    const eventsOf = async (): Promise<Json[]> => (await h.call('GET', `/v1/runs/${runId}/events`)).body.events;
    // The sync puts the size back (one more generation) and waits for the operator to see it.
    await expect.poll(async () => (await eventsOf()).find((e) => e.type === 'manifests.wait')?.data.objects, { timeout: 5_000 }).toEqual(['Widget.example.com apps/w1']);
    expect((await h.call('GET', `/v1/runs/${runId}`)).body.state).toBe('running');
    const w = c.kube.object('example.com/v1', 'Widget', 'apps', 'w1') as Json;
    expect(w.metadata.generation).toBe(generation + 1);
    c.kube.putObject({ ...w, status: { observedGeneration: generation + 1, conditions: [{ type: 'Ready', status: 'True' }] } });
    const run = await finishedRun(h, runId);
    expect(run.error).toBeNull();
    expect((await eventsOf()).filter((e) => e.type === 'manifests.ready').map((e) => e.message)).toEqual(['ready: Widget.example.com apps/w1']);

    // An operator that says it is stuck (Stalled) fails the run at once, not when the wait runs out.
    const stuck = handEdit({ observedGeneration: 0 });
    c.kube.putObject({ ...(c.kube.object('example.com/v1', 'Widget', 'apps', 'w1') as Json), status: { observedGeneration: stuck + 1, conditions: [{ type: 'Stalled', status: 'True', reason: 'QuotaExceeded', message: 'no room for 3 widgets' }] } }, { manager: 'kubectl', operation: 'Update' });
    const failed = await sync(h, c);
    expect(failed.run.error).toBe('Widget.example.com apps/w1 will not become ready: no room for 3 widgets');
  });

  it('an inline manifest added to a control plane\'s patches is applied by the next sync, and pruned once removed', async () => {
    const { h, c } = await setup();
    const cm = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: default\ndata:\n  hello: world\n';
    const patch = (inline: Json[]) => ({ cluster: { inlineManifests: inline } });
    await patchControlPlanes(h, c, [patch([{ name: 'extra', contents: cm }])]);
    const added = await sync(h, c);
    expect(added.run.state).toBe('succeeded');
    expect(applied(added.events)['ConfigMap default/extra']).toBe('created');
    expect((c.kube.object('v1', 'ConfigMap', 'default', 'extra') as Json).data).toEqual({ hello: 'world' });

    await patchControlPlanes(h, c, []);
    const removed = await sync(h, c);
    expect(removed.run.state).toBe('succeeded');
    expect(removed.events.filter((e) => e.type === 'manifests.prune').map((e) => e.data.object)).toEqual(['ConfigMap default/extra']);
    expect(c.kube.object('v1', 'ConfigMap', 'default', 'extra')).toBeUndefined();
    expect(inventoryKeys(c)).not.toContain('default_extra__ConfigMap');
  });
});

/** A push of one configured machine over mTLS, so its sim runs the config its patches now give. */
/** Gives both control planes these patches and pushes them, so their sims render what the patches say. */
async function patchControlPlanes(hh: Harness, c: UpgradeCluster, patches: Json[]): Promise<void> {
  for (const name of ['cp1', 'cp2']) {
    const id = c.machineIds.get(name)!;
    expect((await hh.call('PATCH', `/v1/clusters/${c.clusterId}/machines/${id}`, { body: { patches } })).status).toBe(200);
    await push(hh, c, name);
  }
}

async function push(hh: Harness, c: UpgradeCluster, node: string): Promise<void> {
  const id = c.machineIds.get(node)!;
  await hh.deps.db.update(machines).set({ state: 'configured' }).where(eq(machines.id, id));
  const res = await hh.call('POST', `/v1/clusters/${c.clusterId}/machines/${id}/push-config`, { body: {} });
  expect(res.status).toBe(202);
  expect((await finishedRun(hh, res.body.run.id)).state).toBe('succeeded');
}

describe('POST /v1/clusters/:id/sync-manifests validation', () => {
  it('rejects bad input with a clear 4xx and queues nothing', async () => {
    const { h, c } = await setup({ bootstrapped: false });
    const post = (body: unknown, id = c.clusterId) => h.call('POST', `/v1/clusters/${id}/sync-manifests`, { body });
    const notBootstrapped = await post({});
    expect(notBootstrapped.status).toBe(409);
    expect(notBootstrapped.body.error).toMatchObject({ code: 'not_bootstrapped' });
    await h.deps.db.update(clusters).set({ bootstrappedAt: Date.now() }).where(eq(clusters.id, c.clusterId));
    for (const bad of [{ prune: 'no' }, { dryRun: 1 }, { force: true }, { recreate: 'yes' }, { inventoryPolicy: 'Mine' }, []]) {
      const res = await post(bad);
      expect(res.status).toBe(400);
    }
    expect((await post({}, 'cl_nope')).status).toBe(404);
    expect((await h.call('GET', `/v1/runs?cluster=${c.clusterId}`)).body.runs ?? []).toEqual([]);
  });
});

describe('dashboard: Sync manifests', () => {
  it('offers the sync and its preview once the cluster is bootstrapped, and queues them', async () => {
    const { h, c } = await setup({ bootstrapped: false });
    const b = new FormClient(h.app);
    await b.login(h.adminToken);
    const page = `/clusters/${c.clusterId}`;
    expect((await b.get(page)).text).not.toContain('Sync manifests');
    await h.deps.db.update(clusters).set({ bootstrappedAt: Date.now() }).where(eq(clusters.id, c.clusterId));
    const text = (await b.get(page)).text;
    expect(text).toContain('Sync manifests');
    expect(text).toContain('Preview manifest sync');

    // What the browser sends: the checked boxes, and the name of the button pressed.
    const preview = await b.submit(page, `${page}/sync-manifests`, { prune: 'on', dryRun: 'on' });
    expect(preview.location).toMatch(/^\/runs\//);
    const runId = preview.location!.split('/').pop()!;
    const run = await finishedRun(h, runId);
    expect(run.params).toEqual({ dryRun: true });
    expect(run.state).toBe('succeeded');
    const synced = await b.submit(page, `${page}/sync-manifests`, { prune: 'on', recreate: 'on' });
    const real = await finishedRun(h, synced.location!.split('/').pop()!);
    expect(real.params).toEqual({ recreate: true });
    expect(real.state).toBe('succeeded');
    expect(c.kube.object('v1', 'ConfigMap', 'kube-system', INVENTORY)).toBeDefined();
    const keeping = await b.submit(page, `${page}/sync-manifests`, { inventoryPolicy: 'AdoptIfNoInventory' });
    expect((await finishedRun(h, keeping.location!.split('/').pop()!)).params).toEqual({ prune: false });
    const adopting = await b.submit(page, `${page}/sync-manifests`, { prune: 'on', inventoryPolicy: 'AdoptAll' });
    expect((await finishedRun(h, adopting.location!.split('/').pop()!)).params).toEqual({ inventoryPolicy: 'AdoptAll' });
    const bad = await b.submit(page, `${page}/sync-manifests`, { prune: 'on', inventoryPolicy: 'Mine' });
    expect(bad.status).toBe(400);
    expect(alertOf(bad.text)).toMatch(/inventoryPolicy/);

    // A retry from the run page runs it with the same choices.
    const realPage = `/runs/${real.id}`;
    const again = await b.submit(realPage, `${realPage}/retry`, {});
    const retried = await finishedRun(h, again.location!.split('/').pop()!);
    expect(retried.id).not.toBe(real.id);
    expect(retried.params).toEqual({ recreate: true });
  });
});

describe('bootstrap-manifest sync, reading the manifests', () => {
  it('takes a control plane that lists none for one that has not rendered them, never for an empty set that would prune everything', async () => {
    const sim = await startKubeSim();
    try {
      const kube = await openKubeWriter(kubeconfigFor(sim, await issueClientCert(sim.ca)), 2_000);
      sim.putObject({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: INVENTORY, namespace: 'kube-system' }, data: { 'kube-system_coredns_apps_Deployment': '' } });
      const listed: string[] = [];
      // Nodes that answer List with nothing (a control plane whose controllers have not run yet).
      const access = { withTalos: async (address: string, fn: (c: unknown) => Promise<unknown>) => fn({ listResources: async () => (listed.push(address), []) }) } as unknown as ClusterAccess;
      const writes = sim.writes.length;
      const ctx = { access, kube, controlPlanes: [{ name: 'cp1', address: 'a1' }, { name: 'cp2', address: 'a2' }], hard: new AbortController().signal, signal: new AbortController().signal, emit: async () => {} };
      await expect(syncManifests(ctx, { prune: true, dryRun: false, recreate: false, inventoryPolicy: 'AdoptIfNoInventory', waitMs: 0, pollMs: 10, callDeadlineMs: 1_000 })).rejects.toThrow(
        'cannot read the bootstrap manifests from any control plane: cp1: lists no bootstrap manifests; cp2: lists no bootstrap manifests',
      );
      expect(listed).toEqual(['a1', 'a2']);
      expect(sim.writes.length).toBe(writes);
      kube.close();
    } finally {
      await sim.stop();
    }
  });
});

/** A request the test answers in the sim's place (an answer, or an error thrown as the writer would), or undefined to let the sim answer. */
type Stand = (method: string, path: string) => { status: number; body: unknown; retryAfterMs?: number } | Error | undefined;

/** A writer that lets `stand` answer in front of `inner`, recording what each request met. */
function inFront(inner: KubeWriter, stand: Stand, met: string[]): KubeWriter {
  return {
    server: inner.server,
    close: () => inner.close(),
    async request(method, path, opts) {
      const mine = stand(method, path.split('?')[0]!);
      if (mine instanceof Error) throw (met.push(`${method} ${path}: thrown`), mine);
      if (mine) return (met.push(`${method} ${path}: ${mine.status}`), mine);
      try {
        const r = await inner.request(method, path, opts);
        return (met.push(`${method} ${path}: ${r.status}`), r);
      } catch (err) {
        throw (met.push(`${method} ${path}: ${(err as { code?: string }).code}`), err);
      }
    },
  };
}

/** syncManifests against `sim` alone, with `objects` as one bootstrap manifest (99-app) a control plane lists. */
function directSync(sim: KubeSim, kube: KubeWriter, objects: object[], o: { waitMs: number; signal?: AbortSignal }): ReturnType<typeof syncManifests> {
  const manifest = { id: '99-app', namespace: MANIFESTS_NAMESPACE, type: MANIFEST_TYPE, version: '1', phase: 'running', owner: '', labels: {}, yamlSpec: JSON.stringify(objects) };
  const access = { withTalos: async (_address: string, fn: (c: unknown) => Promise<unknown>) => fn({ listResources: async () => [manifest] }) } as unknown as ClusterAccess;
  const ctx = { access, kube, controlPlanes: [{ name: 'cp1', address: 'a1' }], hard: new AbortController().signal, signal: o.signal ?? new AbortController().signal, emit: async () => {} };
  return syncManifests(ctx, { prune: true, dryRun: false, recreate: true, inventoryPolicy: 'AdoptIfNoInventory', waitMs: o.waitMs, pollMs: 20, callDeadlineMs: 1_000 });
}

const workload = (kind: 'Deployment' | 'DaemonSet', name: string, labels: Record<string, string>, extra: object = {}): object => ({
  apiVersion: 'apps/v1',
  kind,
  metadata: { name, namespace: 'kube-system', labels },
  spec: { ...extra, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'busybox' }] } } },
});

const UNAVAILABLE = { status: 503, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'ServiceUnavailable', code: 503, message: 'the server is currently unable to handle the request' } };
const AGENT = '/apis/apps/v1/namespaces/kube-system/daemonsets/agent';
const WEB = '/apis/apps/v1/namespaces/kube-system/deployments/web';

describe('bootstrap-manifest sync, waiting through a restarting apiserver', () => {
  it('a read the apiserver fails for a moment (503, a reset connection, no answer in time) is polled past, in the deletion wait and the readiness wait', async () => {
    const sim = await startKubeSim();
    try {
      const writer = await openKubeWriter(kubeconfigFor(sim, await issueClientCert(sim.ca)), 200);
      // An agent an older Talos deployed, with a selector the manifest no longer has: recreated.
      sim.putObject(workload('DaemonSet', 'agent', { app: 'agent' }) as Record<string, unknown>);
      sim.setRollout({ ms: 150 });
      let agentDeleted = false;
      let webPatched = false;
      let agentReads = 0;
      let webReads = 0;
      const stand: Stand = (method, path) => {
        if (path === AGENT && method === 'DELETE') agentDeleted = true;
        if (path === WEB && method === 'PATCH') webPatched = true;
        if (path === AGENT && method === 'GET' && agentDeleted && ++agentReads <= 2) {
          return agentReads === 1 ? UNAVAILABLE : transportError(`GET ${writer.server}${path}`, Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
        }
        if (path === WEB && method === 'GET' && webPatched) {
          webReads++;
          if (webReads <= 2) return UNAVAILABLE;
          // The apiserver goes silent for a while: reads meet the 200 ms per-request deadline.
          if (webReads === 3) {
            sim.blackhole(true);
            setTimeout(() => sim.blackhole(false), 300);
          }
        }
        return undefined;
      };
      const met: string[] = [];
      const kube = inFront(writer, stand, met);
      const result = await directSync(sim, kube, [workload('DaemonSet', 'agent', { app: 'agent', tier: 'node' }), workload('Deployment', 'web', { app: 'web' })], { waitMs: 5_000 });
      expect(result.changes).toEqual([
        { object: 'DaemonSet.apps kube-system/agent', action: 'recreated', manifest: '99-app', fields: ['spec.selector'] },
        { object: 'Deployment.apps kube-system/web', action: 'created', manifest: '99-app' },
      ]);
      const deleted = met.findIndex((m) => m.startsWith(`DELETE ${AGENT}`));
      expect(met.slice(deleted).filter((m) => m.startsWith(`GET ${AGENT}`)).slice(0, 3)).toEqual([`GET ${AGENT}: 503`, `GET ${AGENT}: thrown`, `GET ${AGENT}: 404`]);
      const patched = met.findIndex((m) => m.startsWith(`PATCH ${WEB}`));
      const webMet = met.slice(patched).filter((m) => m.startsWith(`GET ${WEB}`));
      expect(webMet.slice(0, 3)).toEqual([`GET ${WEB}: 503`, `GET ${WEB}: 503`, `GET ${WEB}: deadline`]);
      expect(webMet.at(-1)).toBe(`GET ${WEB}: 200`);
      expect((sim.object('apps/v1', 'Deployment', 'kube-system', 'web') as Json).status.availableReplicas).toBe(1);
      expect((sim.object('apps/v1', 'DaemonSet', 'kube-system', 'agent') as Json).spec.selector.matchLabels).toEqual({ app: 'agent', tier: 'node' });
      writer.close();
    } finally {
      await sim.stop();
    }
  });

  it("a wait reads again no sooner than a failed read's Retry-After asks, and not past its end", async () => {
    const sim = await startKubeSim();
    try {
      const writer = await openKubeWriter(kubeconfigFor(sim, await issueClientCert(sim.ca)), 1_000);
      let webPatched = false;
      const readAt: number[] = [];
      const stand: Stand = (method, path) => {
        if (path !== WEB) return undefined;
        if (method === 'PATCH') webPatched = true;
        if (method !== 'GET' || !webPatched) return undefined;
        readAt.push(Date.now());
        // Throttled twice (API Priority and Fairness answers 429 with a Retry-After), then served.
        return readAt.length <= 2 ? { status: 429, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'TooManyRequests', code: 429, message: 'Too many requests, please try again later.' }, retryAfterMs: 300 } : undefined;
      };
      const result = await directSync(sim, inFront(writer, stand, []), [workload('Deployment', 'web', { app: 'web' })], { waitMs: 5_000 });
      expect(result.changes).toEqual([{ object: 'Deployment.apps kube-system/web', action: 'created', manifest: '99-app' }]);
      expect(readAt.length).toBeGreaterThanOrEqual(3);
      // The poll is 20 ms; each read after a 429 waited the 300 ms asked for.
      expect(readAt[1]! - readAt[0]!).toBeGreaterThanOrEqual(290);
      expect(readAt[2]! - readAt[1]!).toBeGreaterThanOrEqual(290);

      // Asked for longer than the wait has left: it reads once more at its end, then names the failure.
      webPatched = false;
      readAt.length = 0;
      const always: Stand = (method, path) => {
        if (path !== WEB) return undefined;
        if (method === 'PATCH') webPatched = true;
        if (method !== 'GET' || !webPatched) return undefined;
        readAt.push(Date.now());
        return { status: 503, body: UNAVAILABLE.body, retryAfterMs: 60_000 };
      };
      const t0 = Date.now();
      await expect(directSync(sim, inFront(writer, always, []), [workload('Deployment', 'web', { app: 'web' }, { replicas: 2 })], { waitMs: 600 })).rejects.toThrow(/^not ready within 1 s: .*HTTP 503/);
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect(readAt.length).toBeLessThanOrEqual(3);
      writer.close();
    } finally {
      await sim.stop();
    }
  });

  it('a wait whose reads keep failing ends at its timeout naming the last failure; a refusal, or a cancel, ends it at once', async () => {
    const sim = await startKubeSim();
    try {
      const writer = await openKubeWriter(kubeconfigFor(sim, await issueClientCert(sim.ca)), 200);
      let webPatched = false;
      let reads = 0;
      let answer: Stand = () => undefined;
      // Reads of web once the sync has applied it, i.e. the wait's.
      const stand: Stand = (method, path) => {
        if (path !== WEB) return undefined;
        if (method === 'PATCH') webPatched = true;
        return method === 'GET' && webPatched ? (reads++, answer(method, path)) : undefined;
      };
      const kube = inFront(writer, stand, []);
      const web = (replicas: number): object[] => [workload('Deployment', 'web', { app: 'web' }, { replicas })];

      // A 403 says the same every time: the run fails at once, not when the wait runs out.
      answer = () => ({ status: 403, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Forbidden', code: 403, message: 'deployments.apps "web" is forbidden' } });
      let t0 = Date.now();
      await expect(directSync(sim, kube, web(1), { waitMs: 10_000 })).rejects.toThrow(`GET ${writer.server}${WEB}: 403 Forbidden: deployments.apps "web" is forbidden`);
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect(reads).toBe(1);

      // A cancel ends a wait polling past failures at once too.
      const cancel = new AbortController();
      const cancelled = new Error('cancelled by the test');
      answer = () => {
        if (reads === 3) setTimeout(() => cancel.abort(cancelled), 10);
        return UNAVAILABLE;
      };
      webPatched = false;
      reads = 0;
      t0 = Date.now();
      await expect(directSync(sim, kube, web(2), { waitMs: 10_000, signal: cancel.signal })).rejects.toBe(cancelled);
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect(reads).toBeGreaterThanOrEqual(3);

      // Only 503s, then no answer at all: the wait polls until its end and names the last failure.
      let fails = 0;
      answer = () => {
        if (++fails === 4) sim.blackhole(true);
        return fails < 4 ? UNAVAILABLE : undefined;
      };
      webPatched = false;
      reads = 0;
      t0 = Date.now();
      const ends = directSync(sim, kube, web(3), { waitMs: 1_000 });
      await expect(ends).rejects.toThrow(new RegExp(`^not ready within 1 s: Deployment\\.apps kube-system/web \\(last read failed: GET ${writer.server.replace(/\./g, '\\.')}/apis/apps/v1/namespaces/kube-system/deployments/web: no answer within the 200 ms deadline\\)$`));
      expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
      expect(reads).toBeGreaterThan(4);
      writer.close();
    } finally {
      await sim.stop();
    }
  });
});
