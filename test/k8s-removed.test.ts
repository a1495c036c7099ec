import { describe, expect, it } from 'vitest';
import { buildMachineDocuments } from '../lib/talos/config.ts';
import type { ConfigDocument } from '../lib/talos/patch.ts';
import {
  knownRemovalMinors,
  removedInKubernetes,
  removedByUpgrade,
  removedRefusal,
  removedUsesByMachine,
  removesNothing,
  removedUsesInConfig,
  resourceListPath,
  type RemovedInMinor,
} from '../lib/talos/k8s-removed.ts';
import { sharedSecrets } from './support/harness.ts';

/** A machine's documents as RezusCloud renders them at Kubernetes 1.37.0, with `patch` on top. */
async function docs(role: 'controlplane' | 'worker', patch: ConfigDocument): Promise<ConfigDocument[]> {
  return buildMachineDocuments({
    secrets: await sharedSecrets(),
    clusterName: 'c',
    endpoint: 'https://10.0.0.1:6443',
    role,
    talosVersion: 'v1.14.0',
    kubernetesVersion: '1.37.0',
    installDisk: '/dev/sda',
    hostname: role === 'controlplane' ? 'cp1' : 'w1',
    clusterPatches: [patch],
  });
}

const v137 = (): RemovedInMinor => removedInKubernetes('1.37.0')!;

describe('what a Kubernetes minor removes', () => {
  it('is looked up by the target\'s minor, and unknown minors say so', () => {
    expect(removedInKubernetes('1.37.0')?.resources).toEqual(['workloads.v1alpha2.scheduling.k8s.io', 'podgroups.v1alpha2.scheduling.k8s.io']);
    expect(removedInKubernetes('v1.37.2-rc.0')).toBe(removedInKubernetes('1.37.0'));
    expect(removedInKubernetes('1.25.0')?.admissionPlugins).toEqual(['PodSecurityPolicy']);
    expect(removedInKubernetes('1.38.0')).toBeUndefined();
    expect(removedInKubernetes('1.24.0')).toBeUndefined();
    expect(removedInKubernetes('2.37.0')).toBeUndefined();
    expect(knownRemovalMinors()).toEqual([25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37]);
  });

  it('an upgrade meets the next minor\'s list, and nothing within a minor', () => {
    expect(removedByUpgrade('1.36.3', '1.37.0')).toBe(removedInKubernetes('1.37.0'));
    expect(removesNothing(removedByUpgrade('1.36.3', '1.36.5')!)).toBe(true);
    expect(removesNothing(removedByUpgrade('1.36.3', '1.37.0')!)).toBe(false);
    expect(removesNothing(removedInKubernetes('1.29.0')!)).toBe(false);
    expect(removedByUpgrade('1.37.2', '1.38.0')).toBeUndefined();
  });

  it('lists each removed API at the path that lists its objects in every namespace', () => {
    expect(resourceListPath('workloads.v1alpha2.scheduling.k8s.io')).toBe('/apis/scheduling.k8s.io/v1alpha2/workloads');
    expect(resourceListPath('podsecuritypolicies.v1beta1.policy')).toBe('/apis/policy/v1beta1/podsecuritypolicies');
    expect(resourceListPath('pods.v1')).toBe('/api/v1/pods');
    expect(() => resourceListPath('workloads')).toThrow(/not a resource.version.group/);
    for (const minor of knownRemovalMinors()) {
      for (const r of removedInKubernetes(`1.${minor}.0`)!.resources) expect(resourceListPath(r)).toMatch(/^\/apis\/[a-z0-9.-]+\/v\d+(alpha|beta)\d+\/[a-z]+$/);
    }
  });
});

describe('uses in a rendered config', () => {
  it('finds removed flags, feature gates (string, list and kubelet extraConfig) and admission plugins on a control plane', async () => {
    const gone: RemovedInMinor = { ...v137(), admissionPlugins: ['PodSecurityPolicy'] };
    const cp = await docs('controlplane', {
      cluster: {
        apiServer: { extraArgs: { 'feature-gates': 'GangScheduling=true, StillHere=false', 'enable-admission-plugins': 'NodeRestriction,PodSecurityPolicy' } },
        scheduler: { extraArgs: { 'feature-gates': ['WorkloadAwarePreemption=true'] } },
        proxy: { extraArgs: { 'feature-gates': 'PreventStaticPodAPIReferences=false' } },
      },
      machine: {
        kubelet: {
          extraArgs: { 'boot-id-file': '/etc/id', 'boot-id-file-kept': 'x', 'feature-gates': ['StillHere=true', 'AnyVolumeDataSource=true'] },
          extraConfig: { featureGates: { DeclarativeValidationTakeover: true, StillHere: true } },
        },
      },
    });
    expect(removedUsesInConfig(cp, 'controlplane', gone)).toEqual([
      { component: 'kube-apiserver', kind: 'feature gate', name: 'GangScheduling', field: 'cluster.apiServer.extraArgs' },
      { component: 'kube-apiserver', kind: 'admission plugin', name: 'PodSecurityPolicy', field: 'cluster.apiServer.extraArgs' },
      { component: 'kube-scheduler', kind: 'feature gate', name: 'WorkloadAwarePreemption', field: 'cluster.scheduler.extraArgs' },
      { component: 'kube-proxy', kind: 'feature gate', name: 'PreventStaticPodAPIReferences', field: 'cluster.proxy.extraArgs' },
      { component: 'kubelet', kind: 'flag', name: 'boot-id-file', field: 'machine.kubelet.extraArgs' },
      { component: 'kubelet', kind: 'feature gate', name: 'AnyVolumeDataSource', field: 'machine.kubelet.extraArgs' },
      { component: 'kubelet', kind: 'feature gate', name: 'DeclarativeValidationTakeover', field: 'machine.kubelet.extraConfig.featureGates' },
    ]);
    // The same patch on an older target finds only what that minor removed.
    expect(removedUsesInConfig(cp, 'controlplane', removedInKubernetes('1.36.0')!)).toEqual([]);
  });

  it('reads a worker\'s kubelet only, and a flag only on the component that lost it', async () => {
    const patch = {
      cluster: { apiServer: { extraArgs: { 'feature-gates': 'GangScheduling=true' } } },
      // `containerd` is one of the kubelet's cAdvisor flags gone in 1.37; no other component lost it.
      machine: { kubelet: { extraArgs: { containerd: '/run/containerd/containerd.sock' } } },
    };
    const w = await docs('worker', patch);
    expect(removedUsesInConfig(w, 'worker', v137())).toEqual([{ component: 'kubelet', kind: 'flag', name: 'containerd', field: 'machine.kubelet.extraArgs' }]);
    const cm = await docs('controlplane', { cluster: { controllerManager: { extraArgs: { containerd: 'x' } } } });
    expect(removedUsesInConfig(cm, 'controlplane', v137())).toEqual([]);
    expect(removedUsesInConfig(await docs('controlplane', {}), 'controlplane', v137())).toEqual([]);
  });

  it('names each use once with every machine that has it', async () => {
    const patch = { machine: { kubelet: { extraArgs: { 'boot-id-file': '/etc/id' } } }, cluster: { apiServer: { extraArgs: { 'feature-gates': 'GangScheduling=true' } } } };
    const lines = removedUsesByMachine(
      [
        { name: 'cp1', role: 'controlplane', documents: await docs('controlplane', patch) },
        { name: 'w1', role: 'worker', documents: await docs('worker', patch) },
        { name: 'w2', role: 'worker', documents: await docs('worker', {}) },
      ],
      v137(),
    );
    expect(lines).toEqual(['kube-apiserver feature gate GangScheduling (cluster.apiServer.extraArgs) on cp1', 'kubelet flag --boot-id-file (machine.kubelet.extraArgs) on cp1, w1']);
    expect(removedRefusal('1.37.0', lines)).toBe(`Kubernetes 1.37 removes what the cluster still uses: ${lines.join('; ')}`);
  });
});
