import { describe, expect, it } from 'vitest';
import { componentsAfterStep, configImage, stepConfig } from '../functions/upgrade/kubernetes-plan.ts';
import { renderOrReject } from '../functions/machine-config/render.ts';
import { renderMachineConfig } from '../lib/talos/config.ts';
import { kubernetesPathProblem, kubernetesRangeOf, kubernetesUnsupportedReason } from '../lib/talos/k8s-compat.ts';
import { sharedSecrets } from './support/harness.ts';

describe('Talos ↔ Kubernetes support', () => {
  it('knows each Talos line\'s Kubernetes minors, pre-releases and patches included', () => {
    expect(kubernetesRangeOf('v1.13.9')).toEqual({ min: '1.31', max: '1.36' });
    expect(kubernetesRangeOf('v1.14.0-rc.1')).toEqual({ min: '1.32', max: '1.37' });
    expect(kubernetesRangeOf('v1.6.7')).toEqual({ min: '1.24', max: '1.29' });
    expect(kubernetesRangeOf('v1.99.0')).toBeUndefined();
    expect(kubernetesUnsupportedReason('v1.13.9', '1.36.3')).toBeUndefined();
    expect(kubernetesUnsupportedReason('v1.13.9', '1.31.0')).toBeUndefined();
    expect(kubernetesUnsupportedReason('v1.13.9', '1.36.99')).toBeUndefined();
    expect(kubernetesUnsupportedReason('v1.14.0', '1.37.0-rc.0')).toBeUndefined();
    expect(kubernetesUnsupportedReason('v1.13.9', '1.37.0')).toBe('Kubernetes 1.37.0 is too new for Talos v1.13.9 (it runs 1.31 to 1.36)');
    expect(kubernetesUnsupportedReason('v1.13.9', '1.30.14')).toBe('Kubernetes 1.30.14 is too old for Talos v1.13.9 (it runs 1.31 to 1.36)');
    expect(kubernetesUnsupportedReason('v1.13.9', '2.0.0')).toMatch(/too new/);
    expect(kubernetesUnsupportedReason('v1.99.0', '1.36.3')).toMatch(/no known Kubernetes support range/);
  });

  it('allows forward upgrades within a minor or to the next one only', () => {
    expect(kubernetesPathProblem('1.36.3', '1.36.5')).toBeUndefined();
    expect(kubernetesPathProblem('1.36.3', '1.37.0')).toBeUndefined();
    expect(kubernetesPathProblem('1.36.3', '1.37.0-rc.0')).toBeUndefined();
    expect(kubernetesPathProblem('1.36.3', '1.36.3')?.code).toBe('same_version');
    expect(kubernetesPathProblem('1.36.3', '1.36.2')?.code).toBe('downgrade_refused');
    expect(kubernetesPathProblem('1.36.3', '1.35.9')?.code).toBe('downgrade_refused');
    expect(kubernetesPathProblem('1.36.3', '1.38.0')).toEqual({ code: 'unsupported_upgrade_path', message: 'unsupported upgrade path 1.36->1.38: upgrade one minor version at a time' });
    expect(kubernetesPathProblem('1.36.3', '2.0.0')?.code).toBe('unsupported_upgrade_path');
  });
});

describe('step configs', () => {
  it('move the components up to the step and keep later ones (patched images included) as they were', async () => {
    const secrets = await sharedSecrets();
    // A mirror registry patched in for the scheduler must survive both renders.
    const patch = { cluster: { scheduler: { image: 'mirror.example/kube-scheduler:v1.36.3' } } };
    const base = { secrets, clusterName: 'c', endpoint: 'https://10.0.0.1:6443', role: 'controlplane' as const, talosVersion: 'v1.14.0', installDisk: '/dev/sda', hostname: 'cp1' };
    const oldYaml = renderMachineConfig({ ...base, kubernetesVersion: '1.36.3', clusterPatches: [patch] });
    const newYaml = renderMachineConfig({ ...base, kubernetesVersion: '1.37.0', clusterPatches: [{ cluster: { scheduler: { image: 'mirror.example/kube-scheduler:v1.37.0' } } }] });
    const cm = stepConfig(oldYaml, newYaml, 'kube-controller-manager');
    expect(configImage(cm, 'kube-apiserver')).toBe('registry.k8s.io/kube-apiserver:v1.37.0');
    expect(configImage(cm, 'kube-controller-manager')).toBe('registry.k8s.io/kube-controller-manager:v1.37.0');
    expect(configImage(cm, 'kube-scheduler')).toBe('mirror.example/kube-scheduler:v1.36.3');
    expect(configImage(cm, 'kube-proxy')).toBe('registry.k8s.io/kube-proxy:v1.36.3');
    expect(configImage(cm, 'kubelet')).toBe('ghcr.io/siderolabs/kubelet:v1.36.3');
    // The last step is the new render itself, byte for byte; everything but images is untouched.
    expect(stepConfig(oldYaml, newYaml, 'kubelet')).toBe(newYaml);
    expect(cm.replace(/image: \S+/g, '')).toBe(newYaml.replace(/image: \S+/g, ''));

    // A worker has no control-plane sections, and gets none added.
    const worker = { ...base, role: 'worker' as const, hostname: 'w1' };
    const wOld = renderMachineConfig({ ...worker, kubernetesVersion: '1.36.3' });
    const wNew = renderMachineConfig({ ...worker, kubernetesVersion: '1.37.0' });
    const wStep = stepConfig(wOld, wNew, 'kube-apiserver');
    expect(wStep).not.toMatch(/apiServer|proxy|scheduler/);
    expect(configImage(wStep, 'kubelet')).toBe('ghcr.io/siderolabs/kubelet:v1.36.3');
    expect(stepConfig(wOld, wNew, 'kubelet')).toBe(wNew);
  });
});

describe('a config that carries components at another version (an upgrade that stopped part-way)', () => {
  it('each step adds the components up to it at the new version, and keeps what an earlier run moved', () => {
    expect(componentsAfterStep(null, 'kube-apiserver', '1.37.0')).toEqual({ 'kube-apiserver': '1.37.0' });
    expect(componentsAfterStep({ 'kube-apiserver': '1.37.0' }, 'kube-scheduler', '1.37.1')).toEqual({ 'kube-apiserver': '1.37.1', 'kube-controller-manager': '1.37.1', 'kube-scheduler': '1.37.1' });
    // A kubelet step applies the whole new render: every component is on the new version.
    expect(Object.keys(componentsAfterStep({ 'kube-apiserver': '1.37.0' }, 'kubelet', '1.37.0'))).toEqual(['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy', 'kubelet']);
  });

  it("renders those components at their version and the rest at the cluster's, as the step config that put them there", async () => {
    const secrets = await sharedSecrets();
    const cluster = { name: 'c', endpoint: 'https://10.0.0.1:6443', talosVersion: 'v1.14.0', kubernetesVersion: '1.36.3', settings: { patches: [{ cluster: { scheduler: { image: 'mirror.example/kube-scheduler:v1.36.3' } } }] } };
    const cp = { name: 'cp1', role: 'controlplane' as const, installDisk: '/dev/sda', patches: [], address: null };
    const plain = renderOrReject(cluster, cp, secrets);
    expect(renderOrReject(cluster, { ...cp, kubernetesComponents: null }, secrets)).toBe(plain);
    // An entry at the cluster's own version, or a name that is no component, changes nothing.
    expect(renderOrReject(cluster, { ...cp, kubernetesComponents: { 'kube-apiserver': '1.36.3', etcd: '3.6.0' } }, secrets)).toBe(plain);

    const held = renderOrReject(cluster, { ...cp, kubernetesComponents: { 'kube-apiserver': '1.37.0', 'kube-controller-manager': '1.37.0' } }, secrets);
    expect(configImage(held, 'kube-apiserver')).toBe('registry.k8s.io/kube-apiserver:v1.37.0');
    expect(configImage(held, 'kube-controller-manager')).toBe('registry.k8s.io/kube-controller-manager:v1.37.0');
    expect(configImage(held, 'kube-scheduler')).toBe('mirror.example/kube-scheduler:v1.36.3');
    expect(configImage(held, 'kubelet')).toBe('ghcr.io/siderolabs/kubelet:v1.36.3');
    const atTarget = renderOrReject({ ...cluster, kubernetesVersion: '1.37.0' }, cp, secrets);
    expect(held).toBe(stepConfig(plain, atTarget, 'kube-controller-manager'));

    // A worker's config gets no control-plane sections from the entries it shares with the control planes.
    const w = { ...cp, name: 'w1', role: 'worker' as const };
    const wHeld = renderOrReject(cluster, { ...w, kubernetesComponents: componentsAfterStep(null, 'kubelet', '1.37.0') }, secrets);
    expect(wHeld).not.toMatch(/apiServer|controllerManager/);
    expect(configImage(wHeld, 'kubelet')).toBe('ghcr.io/siderolabs/kubelet:v1.37.0');
  });
});
