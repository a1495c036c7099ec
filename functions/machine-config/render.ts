import { buildMachineDocuments, stringifyDocuments, TalosConfigError, type MachineConfigInput } from '../../lib/talos/config.ts';
import { isK8sComponent, takeComponentImages, type K8sComponent } from '../../lib/talos/k8s-images.ts';
import { PatchError, type ConfigDocument } from '../../lib/talos/patch.ts';
import { installerPlatform } from '../../lib/talos/installer.ts';
import type { ClusterSecrets } from '../../lib/talos/secrets.ts';
import { DomainError } from '../../lib/errors.ts';
import type { ClusterRow, MachineRow } from '../inventory/load.ts';
import { addressHost } from '../inventory/address.ts';
import { defaultUpgradeImage } from '../upgrade/plan.ts';
import { readClusterSettings, type ClusterTalosSettings } from './settings.ts';

type MachineLike = Pick<MachineRow, 'name' | 'role' | 'installDisk' | 'patches' | 'address'> & {
  provider?: MachineRow['provider'];
  kubernetesComponents?: MachineRow['kubernetesComponents'];
};
type ClusterLike = Pick<ClusterRow, 'name' | 'endpoint' | 'talosVersion' | 'kubernetesVersion' | 'settings'>;

/** Everything the generator needs for one machine; the same inputs always give the same YAML. */
/** `extraDocuments`: e.g. the mesh's WireguardConfig (lib/mesh/dial.ts meshDelivery). */
export function machineConfigInput(cluster: ClusterLike, machine: MachineLike, secrets: ClusterSecrets, extraDocuments: ConfigDocument[] = []): MachineConfigInput {
  const s = readClusterSettings(cluster.settings);
  // Only the address the user gave goes into certSANs: Talos adds a node's own IPs to its
  // certificates itself, and leaving out what tofu reports keeps user_data from changing after
  // the first apply.
  const addresses = machine.address ? [addressHost(machine.address)] : [];
  return {
    secrets,
    clusterName: cluster.name,
    endpoint: cluster.endpoint,
    role: machine.role,
    talosVersion: cluster.talosVersion,
    kubernetesVersion: cluster.kubernetesVersion,
    hostname: machine.name,
    installDisk: machine.installDisk ?? s.installDisk,
    ...installerOf(s, cluster.talosVersion, machine.provider),
    addresses,
    network: { podSubnets: s.podSubnets, serviceSubnets: s.serviceSubnets },
    clusterPatches: s.patches,
    machinePatches: machine.patches as MachineConfigInput['machinePatches'],
    extraDocuments,
  };
}

/**
 * The cluster's own installer at its Talos version, else its platform's Image Factory installer
 * (see INSTALLER_PLATFORMS). An upgrade moves talosVersion but leaves the stored image alone, so a
 * machine added afterwards would install the old Talos: a tagged image is re-tagged the way the
 * upgrade run picked it. An image given by digest is a pin to one build whose version we cannot
 * read, so it is used as given.
 */
function installerOf(s: ClusterTalosSettings, talosVersion: string, provider: MachineLike['provider']) {
  if (!s.installerImage) return { schematic: s.schematic, platform: installerPlatform(provider) };
  return { installerImage: s.installerImage.includes('@') ? s.installerImage : defaultUpgradeImage(s, talosVersion) };
}

function rejecting<T>(field: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof TalosConfigError || err instanceof PatchError) {
      throw new DomainError('invalid', 'invalid_config', `${field}: ${err.message}`);
    }
    throw err;
  }
}

/**
 * The machine's documents at the cluster's Kubernetes version, except the components its config
 * already carries at another one (a Kubernetes upgrade that stopped part-way): those keep the
 * images of their version, so a push does not move them back under a running cluster.
 */
function machineDocuments(cluster: ClusterLike, machine: MachineLike, secrets: ClusterSecrets, extraDocuments: ConfigDocument[]): ConfigDocument[] {
  const input = machineConfigInput(cluster, machine, secrets, extraDocuments);
  const docs = buildMachineDocuments(input);
  keepsMachineName(docs, machine.name);
  const byVersion = new Map<string, K8sComponent[]>();
  for (const [component, version] of Object.entries(machine.kubernetesComponents ?? {})) {
    if (!isK8sComponent(component) || version === cluster.kubernetesVersion) continue;
    byVersion.set(version, [...(byVersion.get(version) ?? []), component]);
  }
  for (const [version, components] of byVersion) takeComponentImages(docs, components, buildMachineDocuments({ ...input, kubernetesVersion: version }));
  return docs;
}

/**
 * A patch may not give the node another hostname: its Kubernetes node and its etcd member are
 * named after the hostname's first label, and drains, upgrades and the etcd checks find them by
 * the machine's name. A domain after it (`w1.home.arpa`) keeps that label.
 */
function keepsMachineName(docs: ConfigDocument[], name: string): void {
  const doc = docs.find((d) => d.kind === 'HostnameConfig');
  const hostname = typeof doc?.hostname === 'string' ? doc.hostname.toLowerCase() : undefined;
  if (hostname === name || hostname?.startsWith(`${name}.`)) return;
  throw new TalosConfigError([
    {
      path: 'HostnameConfig',
      message: `the hostname must stay the machine's name, ${name} (a domain may follow it): RezusCloud finds the node in Kubernetes and etcd by it; create the machine under the name you want instead`,
    },
  ]);
}

/** Renders, turning generator and patch errors into a 400 that names the path. */
export function renderOrReject(cluster: ClusterLike, machine: MachineLike, secrets: ClusterSecrets, field = 'patches', extraDocuments: ConfigDocument[] = []): string {
  return rejecting(field, () => stringifyDocuments(machineDocuments(cluster, machine, secrets, extraDocuments)));
}

/**
 * Fails like renderOrReject when the config would not render, without writing the YAML: a route
 * that only checks (the run renders again) skips the costliest step, for every machine of a cluster.
 */
export function checkRenders(cluster: ClusterLike, machine: MachineLike, secrets: ClusterSecrets, field = 'patches'): void {
  renderDocuments(cluster, machine, secrets, field);
}

/** The config's documents as renderOrReject would write them, for a route that reads fields of them. */
export function renderDocuments(cluster: ClusterLike, machine: MachineLike, secrets: ClusterSecrets, field = 'patches'): ConfigDocument[] {
  return rejecting(field, () => machineDocuments(cluster, machine, secrets, []));
}
