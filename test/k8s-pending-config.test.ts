/**
 * What a node runs against what RezusCloud renders for it (runner/jobs/upgrade-kubernetes/pending.ts):
 * the MachineConfig resource as a node shows it (admin only, its spec one YAML string), and which
 * documents differ apart from the images a Kubernetes upgrade moves.
 */
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createTalosClient, TalosApiError } from '../lib/talos/api/index.ts';
import { differingDocuments, runningConfigText } from '../runner/jobs/upgrade-kubernetes/pending.ts';
import { createTestOsCa, issueTestClientCert, startSimNode, testMachineConfig } from './sim/talos/index.ts';
import { closeAfterEach, expectRejection } from './talos-api-helpers.ts';

const track = closeAfterEach();
const MACHINE_CONFIG = { namespace: 'config', type: 'MachineConfigs.config.talos.dev' };

const v1 = (apiServer: string, sysctls: Record<string, string> = {}, installer = 'ghcr.io/siderolabs/installer:v1.13.9') =>
  `version: v1alpha1\nmachine:\n  type: controlplane\n  install:\n    disk: /dev/sda\n    image: ${installer}\n  sysctls: ${JSON.stringify(sysctls)}\n  kubelet:\n    image: ghcr.io/siderolabs/kubelet:v1.36.3\ncluster:\n  apiServer:\n    image: ${apiServer}\n`;
const hostname = '---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: cp1\n';
const link = '---\napiVersion: v1alpha1\nkind: LinkConfig\nname: eth1\nmtu: 9000\n';

describe('pending config', () => {
  it('names the documents that differ, not the images an upgrade moves, and never their contents', () => {
    const base = v1('registry.k8s.io/kube-apiserver:v1.36.3') + hostname;
    expect(differingDocuments(base, base)).toEqual([]);
    expect(differingDocuments(base, v1('registry.k8s.io/kube-apiserver:v1.37.0') + hostname)).toEqual([]);
    // A Talos upgrade moves the render's installer tag and pushes no config: not a pending change either.
    expect(differingDocuments(base, v1('registry.k8s.io/kube-apiserver:v1.36.3', {}, 'ghcr.io/siderolabs/installer:v1.14.0') + hostname)).toEqual([]);
    expect(differingDocuments(base, v1('registry.k8s.io/kube-apiserver:v1.36.3', { 'vm.swappiness': '10' }) + hostname)).toEqual(['v1alpha1']);
    expect(differingDocuments(base, base + link)).toEqual(['LinkConfig/eth1']);
    expect(differingDocuments(base + link, base)).toEqual(['LinkConfig/eth1']);
    // A config that does not parse is named by position, never by its text, which holds keys.
    expect(() => differingDocuments('machine:\n  token: s3cr3t-v4lue: [\n', base)).toThrow(/^the config does not parse \(\w+ at line \d+\)$/);
    // Formatting is not a change: the node keeps the bytes it was given, which may be laid out otherwise.
    expect(differingDocuments(base, base.replace('image: registry', 'image:   registry'))).toEqual([]);
  });

  it('reads the config text out of the resource spec, which holds it as one YAML string', () => {
    const text = v1('registry.k8s.io/kube-apiserver:v1.36.3') + hostname;
    expect(runningConfigText(stringify(text))).toBe(text);
    expect(runningConfigText('version: v1alpha1\n')).toBeUndefined();
  });

  it('a node shows its running config to an admin only, as the bytes it was given', async () => {
    const ca = await createTestOsCa();
    const initialConfig = testMachineConfig({ ca, type: 'controlplane', hostname: 'cp-1' });
    const sim = track(await startSimNode({ initialConfig }));
    const client = async (roles: string[]) => {
      const cert = await issueTestClientCert(ca, { roles });
      return track(createTalosClient({ mode: 'configured', address: sim.address, ca: ca.certPem, cert: cert.certPem, key: cert.keyPem }));
    };
    const listed = await (await client(['os:admin'])).listResources(MACHINE_CONFIG);
    expect(listed.map((r) => [r.namespace, r.type, r.id])).toEqual([['config', 'MachineConfigs.config.talos.dev', 'v1alpha1']]);
    expect(runningConfigText(listed[0]!.yamlSpec)).toBe(initialConfig);
    const refused = await expectRejection((await client(['os:reader'])).listResources(MACHINE_CONFIG));
    expect(refused).toBeInstanceOf(TalosApiError);
    expect((refused as TalosApiError).code).toBe('permission-denied');
    expect((refused as TalosApiError).message).toContain('not authorized');
  });
});
