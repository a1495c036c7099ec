// The pure parts of the bootstrap-manifest sync: inventory keys as cli-utils writes them, rollout
// verdicts as kstatus gives them, and the content comparison a dry run decides by.
import { describe, expect, it } from 'vitest';
import { describeRef, parseRefKey, refKey, refOf } from '../lib/kube/object-ref.ts';
import { objectPath } from '../lib/kube/discovery.ts';
import { statusOf } from '../runner/jobs/manifests/rollout.ts';
import { changedFields, describeFields, sameContent } from '../runner/jobs/manifests/content.ts';
import { httpError } from '../lib/kube/errors.ts';

describe('inventory keys', () => {
  it('writes namespace_name_group_kind, core group empty, colons of RBAC names as __, and reads them back', () => {
    const ds = refOf({ apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'kube-proxy', namespace: 'kube-system' } });
    expect(refKey(ds)).toBe('kube-system_kube-proxy_apps_DaemonSet');
    const crb = refOf({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'system:talos-node:bootstrap' } });
    expect(refKey(crb)).toBe('_system__talos-node__bootstrap_rbac.authorization.k8s.io_ClusterRoleBinding');
    const cm = refOf({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'coredns', namespace: 'kube-system' } });
    expect(refKey(cm)).toBe('kube-system_coredns__ConfigMap');
    for (const r of [ds, crb, cm]) expect(parseRefKey(refKey(r))).toEqual(r);
  });

  it('rejects keys that name no object', () => {
    for (const bad of ['', 'nounderscore', 'ns_name', 'ns__apps_Kind', 'ns_a_b_c_apps_Kind', 'ns_name_apps_']) expect(parseRefKey(bad)).toBeUndefined();
  });

  it('describes and locates objects the way the API does', () => {
    expect(describeRef({ group: 'apps', kind: 'Deployment', namespace: 'kube-system', name: 'coredns' })).toBe('Deployment.apps kube-system/coredns');
    expect(describeRef({ group: '', kind: 'Namespace', namespace: '', name: 'x' })).toBe('Namespace x');
    expect(objectPath({ apiVersion: 'apps/v1', kind: 'Deployment', resource: 'deployments', namespaced: true }, 'kube-system', 'coredns')).toBe('/apis/apps/v1/namespaces/kube-system/deployments/coredns');
    expect(objectPath({ apiVersion: 'v1', kind: 'Namespace', resource: 'namespaces', namespaced: false }, '', 'a:b')).toBe('/api/v1/namespaces/a%3Ab');
  });
});

describe('readiness, by kstatus\' rules', () => {
  const deployment = (gen: number, status: Record<string, number>, replicas = 2) => ({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { generation: gen }, spec: { replicas }, status });
  const withConditions = (apiVersion: string, kind: string, conditions: Array<Record<string, string>>, more: Record<string, unknown> = {}) => ({ apiVersion, kind, metadata: { generation: 1 }, ...more, status: { conditions, ...(more['status'] as object | undefined) } });

  it('a Deployment is ready when the controller saw its spec and every replica is updated and available, with no old one left', () => {
    expect(statusOf(deployment(2, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 }))).toEqual({ state: 'current', message: '2 of 2 updated, 2 available' });
    expect(statusOf(deployment(3, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 }))).toEqual({ state: 'in-progress', message: 'generation 3 not observed yet (the controller saw 2)' });
    expect(statusOf(deployment(2, { replicas: 2, updatedReplicas: 2, availableReplicas: 2 }))).toEqual({ state: 'in-progress', message: 'the controller has not seen the new spec yet' });
    expect(statusOf(deployment(2, { observedGeneration: 2, replicas: 3, updatedReplicas: 2, availableReplicas: 2 })).state).toBe('in-progress');
    expect(statusOf(deployment(2, { observedGeneration: 2, replicas: 2, updatedReplicas: 1, availableReplicas: 2 }))).toEqual({ state: 'in-progress', message: '1 of 2 updated, 2 available' });
    // Past spec.progressDeadlineSeconds the controller says so, and waiting longer will not help.
    const counts = { observedGeneration: 2, replicas: 2, updatedReplicas: 1, availableReplicas: 1 };
    const conditions = [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: 'ReplicaSet "web-5d8" has timed out progressing.' }];
    expect(statusOf({ ...deployment(2, counts), status: { ...counts, conditions } })).toEqual({ state: 'failed', message: 'progress deadline exceeded: ReplicaSet "web-5d8" has timed out progressing.' });
  });

  it('a DaemonSet counts its scheduled pods', () => {
    const ds = (status: Record<string, number>) => ({ apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { generation: 1 }, status: { observedGeneration: 1, ...status } });
    expect(statusOf(ds({ desiredNumberScheduled: 3, updatedNumberScheduled: 3, numberAvailable: 3 })).state).toBe('current');
    expect(statusOf(ds({ desiredNumberScheduled: 3, updatedNumberScheduled: 3, numberAvailable: 2 })).state).toBe('in-progress');
  });

  it('any kind: Reconciling is in progress, Stalled failed, being deleted in progress; a Ready condition speaks for kinds without rules', () => {
    const widget = (conditions: Array<Record<string, string>>) => withConditions('example.com/v1', 'Widget', conditions);
    expect(statusOf(widget([{ type: 'Reconciling', status: 'True', reason: 'Progressing', message: 'scaling up' }]))).toEqual({ state: 'in-progress', message: 'scaling up' });
    expect(statusOf(widget([{ type: 'Stalled', status: 'True', reason: 'BadConfig' }]))).toEqual({ state: 'failed', message: 'BadConfig' });
    expect(statusOf(widget([{ type: 'Ready', status: 'False', message: 'waiting for the database' }]))).toEqual({ state: 'in-progress', message: 'waiting for the database' });
    expect(statusOf(widget([{ type: 'Ready', status: 'True' }])).state).toBe('current');
    expect(statusOf({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { generation: 4 } }).state).toBe('current');
    expect(statusOf({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { generation: 4 }, status: { observedGeneration: 3 } }).state).toBe('in-progress');
    expect(statusOf({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { deletionTimestamp: '2026-12-05T00:00:00Z' } })).toEqual({ state: 'in-progress', message: 'being deleted' });
  });

  it('the built-in kinds with rules of their own: CRD, Job, PVC, Pod, Service; ConfigMaps and Secrets are ready at once', () => {
    const crd = (conditions: Array<Record<string, string>>) => withConditions('apiextensions.k8s.io/v1', 'CustomResourceDefinition', conditions);
    expect(statusOf(crd([{ type: 'Established', status: 'True' }])).state).toBe('current');
    expect(statusOf(crd([{ type: 'Established', status: 'False', reason: 'Installing' }])).state).toBe('in-progress');
    expect(statusOf(crd([{ type: 'NamesAccepted', status: 'False', reason: 'KindConflict', message: '"Widget" is already in use' }]))).toEqual({ state: 'failed', message: '"Widget" is already in use' });
    const job = (conditions: Array<Record<string, string>>, status: Record<string, unknown> = {}) => withConditions('batch/v1', 'Job', conditions, { status });
    expect(statusOf(job([{ type: 'Complete', status: 'True' }])).state).toBe('current');
    expect(statusOf(job([{ type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded' }]))).toEqual({ state: 'failed', message: 'the job failed: BackoffLimitExceeded' });
    expect(statusOf(job([])).state).toBe('in-progress');
    expect(statusOf(job([], { startTime: '2026-12-05T00:00:00Z' })).state).toBe('current');
    expect(statusOf({ apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: {}, status: { phase: 'Pending' } })).toEqual({ state: 'in-progress', message: 'not bound (phase Pending)' });
    expect(statusOf({ apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: {}, status: { phase: 'Bound' } }).state).toBe('current');
    expect(statusOf(withConditions('v1', 'Pod', [{ type: 'Ready', status: 'True' }], { status: { phase: 'Running' } })).state).toBe('current');
    expect(statusOf(withConditions('v1', 'Pod', [{ type: 'Ready', status: 'False' }], { status: { phase: 'Running' } })).state).toBe('in-progress');
    const looping = { phase: 'Running', containerStatuses: [{ name: 'coredns', state: { waiting: { reason: 'CrashLoopBackOff' } } }] };
    expect(statusOf(withConditions('v1', 'Pod', [{ type: 'Ready', status: 'False' }], { status: looping }))).toEqual({ state: 'failed', message: 'containers in CrashLoopBackOff: coredns' });
    expect(statusOf({ apiVersion: 'v1', kind: 'Pod', metadata: {}, status: { phase: 'Failed' } }).state).toBe('current');
    // Unschedulable: given 15 s from its creation, then failed.
    const created = Date.parse('2026-12-05T10:00:00Z');
    const pending = withConditions('v1', 'Pod', [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' }], { metadata: { creationTimestamp: '2026-12-05T10:00:00Z' }, status: { phase: 'Pending' } });
    expect(statusOf(pending, created + 14_000)).toEqual({ state: 'in-progress', message: 'not scheduled yet' });
    expect(statusOf(pending, created + 16_000)).toEqual({ state: 'failed', message: 'the pod cannot be scheduled' });
    expect(statusOf({ apiVersion: 'v1', kind: 'Service', metadata: {}, spec: { type: 'LoadBalancer' } }).state).toBe('in-progress');
    expect(statusOf({ apiVersion: 'v1', kind: 'Service', metadata: {}, spec: { type: 'ClusterIP', clusterIP: '10.96.0.10' } }).state).toBe('current');
    // A ConfigMap is ready whatever conditions someone wrote into it.
    expect(statusOf(withConditions('v1', 'ConfigMap', [{ type: 'Ready', status: 'False' }])).state).toBe('current');
  });
});

describe('content comparison', () => {
  it('ignores what the server keeps about an object, not what it says', () => {
    const a = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', resourceVersion: '1', managedFields: [{ manager: 'a' }], labels: { l: '1' } }, data: { k: 'v' } };
    const b = { ...a, metadata: { ...a.metadata, resourceVersion: '7', managedFields: [] }, status: { anything: true } };
    expect(sameContent(a, b)).toBe(true);
    expect(sameContent(a, { ...a, data: { k: 'w' } })).toBe(false);
    expect(sameContent(a, { ...a, metadata: { ...a.metadata, labels: { l: '2' } } })).toBe(false);
  });

  it('names each changed leaf in document order, images with their values, a resized list at its own path', () => {
    const pod = (image: string, extra: Record<string, unknown> = {}) => ({ containers: [{ name: 'c', image, args: ['a'], ...extra }] });
    const before = { apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'p', resourceVersion: '1', labels: { tier: 'node' } }, spec: { template: { spec: pod('r/p:v1') } } };
    const after = {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'p', resourceVersion: '9', labels: { tier: 'node', 'app.kubernetes.io/name': 'p' } },
      spec: { template: { spec: { ...pod('r/p:v2', { args: ['a', 'b'], env: [{ name: 'SECRET', value: 's3cr3t' }] }), hostNetwork: true } } },
      status: { numberReady: 3 },
    };
    const diff = changedFields(before, after);
    expect(diff).toEqual({
      more: 0,
      fields: [
        { path: 'metadata.labels["app.kubernetes.io/name"]' },
        { path: 'spec.template.spec.containers[0].image', from: 'r/p:v1', to: 'r/p:v2' },
        { path: 'spec.template.spec.containers[0].args' },
        { path: 'spec.template.spec.containers[0].env' },
        { path: 'spec.template.spec.hostNetwork' },
      ],
    });
    expect(JSON.stringify(diff)).not.toContain('s3cr3t');
    expect(describeFields(diff)).toBe('metadata.labels["app.kubernetes.io/name"], spec.template.spec.containers[0].image r/p:v1 → r/p:v2, spec.template.spec.containers[0].args and 2 more');
    // A map that appears whole is named by its leaves; past the limit, only counted.
    const wide = changedFields({ metadata: {} }, { metadata: {}, data: Object.fromEntries(Array.from({ length: 7 }, (_, i) => [`k${i}`, 'v'])) }, 5);
    expect(wide.fields.map((f) => f.path)).toEqual(['data.k0', 'data.k1', 'data.k2', 'data.k3', 'data.k4']);
    expect(wide.more).toBe(2);
    expect(describeFields(wide, 1)).toBe('data.k0 and 6 more');
    expect(changedFields(before, { ...before, metadata: { ...before.metadata, resourceVersion: '5' } }).fields).toEqual([]);
  });
});

describe('what the server says cannot change (the sync recreates only that)', () => {
  const invalid = (message: string, causes: Array<{ field: string; message: string }>) => ({ kind: 'Status', status: 'Failure', reason: 'Invalid', code: 422, message, details: { causes: causes.map((c) => ({ reason: 'FieldValueInvalid', ...c })) } });
  it('reads the fields and the verdict from a 422 Status, as an object or as JSON text', () => {
    const service = invalid('Service "kube-dns" is invalid: spec.clusterIPs[0]: Invalid value: []string{"10.96.0.20"}: may not change once set', [{ field: 'spec.clusterIPs[0]', message: 'Invalid value: []string{"10.96.0.20"}: may not change once set' }]);
    expect(httpError('PATCH x', 422, service)).toMatchObject({ status: 422, fields: ['spec.clusterIPs[0]'], immutable: true });
    const selector = invalid('DaemonSet.apps "kube-proxy" is invalid: spec.selector: Invalid value: {…}: field is immutable', [{ field: 'spec.selector', message: 'Invalid value: {…}: field is immutable' }]);
    expect(httpError('PATCH x', 422, JSON.stringify(selector))).toMatchObject({ fields: ['spec.selector'], immutable: true });
    // A manifest the server finds invalid for another reason is not deleted on the way.
    const required = invalid('Deployment.apps "coredns" is invalid: spec.template.spec.containers[0].image: Required value', [{ field: 'spec.template.spec.containers[0].image', message: 'Required value' }]);
    expect(httpError('PATCH x', 422, required)).toMatchObject({ fields: ['spec.template.spec.containers[0].image'], immutable: false });
    expect(httpError('PATCH x', 409, { message: 'field is immutable' })).toMatchObject({ immutable: false, fields: [] });
    expect(httpError('PATCH x', 422, 'not json').message).toBe('PATCH x: HTTP 422: not json');
  });
});
