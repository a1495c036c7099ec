import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { INSTALLER_PLATFORMS, VANILLA_SCHEMATIC } from '../lib/talos/installer.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';

const VERSION = 'v1.13.9';
const SCHEMATIC = 'a'.repeat(64);
const EXPECTED: Record<string, string> = {
  aws: 'aws-installer',
  oci: 'oracle-installer',
  openstack: 'openstack-installer',
  hetzner: 'hcloud-installer',
  metal: 'metal-installer',
  local: 'installer',
};

let h: Harness;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => h.close());

async function installImageOf(clusterId: string, machineId: string): Promise<string> {
  const res = await h.call('GET', `/v1/clusters/${clusterId}/machines/${machineId}/config`);
  expect(res.status).toBe(200);
  const v1alpha1 = parseAllDocuments(res.body as string)
    .map((d) => d.toJSON() as { machine?: { install?: { image?: string } } })
    .find((d) => d.machine);
  return v1alpha1!.machine!.install!.image!;
}

async function addMachines(clusterId: string): Promise<Record<string, string>> {
  const ids: Record<string, string> = {};
  for (const provider of Object.keys(EXPECTED)) {
    const res = await h.call('POST', `/v1/clusters/${clusterId}/machines`, {
      body: { name: `m-${provider}`, role: 'worker', provider, address: '2001:db8::10' },
    });
    expect(res.status).toBe(201);
    ids[provider] = res.body.id;
  }
  return ids;
}

describe('installer image per platform', () => {
  it('covers every provider a machine can have', () => {
    expect(Object.keys(INSTALLER_PLATFORMS).sort()).toEqual(Object.keys(EXPECTED).sort());
  });

  it('renders each machine’s config with its own platform’s installer of the cluster’s schematic', async () => {
    const { clusterId } = await seedCluster(h, 'home', { schematic: SCHEMATIC });
    const ids = await addMachines(clusterId);
    for (const [provider, id] of Object.entries(ids)) {
      expect(await installImageOf(clusterId, id)).toBe(`factory.talos.dev/${EXPECTED[provider]}/${SCHEMATIC}:${VERSION}`);
    }
  });

  it('keeps an installer image the cluster names itself, for every machine', async () => {
    const own = 'registry.example/talos/installer:v1.13.9';
    const { clusterId } = await seedCluster(h, 'home', { installerImage: own });
    const ids = await addMachines(clusterId);
    for (const id of Object.values(ids)) expect(await installImageOf(clusterId, id)).toBe(own);
  });

  it('installs the cluster’s own installer at the Talos version it runs after an upgrade', async () => {
    const { clusterId } = await seedCluster(h, 'home', { talosVersion: 'v1.12.11', kubernetesVersion: '1.35.2', installerImage: 'registry.example/talos/installer:v1.12.11' });
    // What a finished upgrade run leaves: the new version, the settings as they were.
    await h.deps.database.client.execute({ sql: 'UPDATE clusters SET talos_version = ? WHERE id = ?', args: [VERSION, clusterId] });
    const ids = await addMachines(clusterId);
    for (const id of Object.values(ids)) expect(await installImageOf(clusterId, id)).toBe(`registry.example/talos/installer:${VERSION}`);
  });

  it('keeps an installer image pinned by digest as given, whatever the cluster’s version', async () => {
    const pinned = `registry.example/talos/installer@sha256:${'b'.repeat(64)}`;
    const { clusterId } = await seedCluster(h, 'home', { talosVersion: 'v1.12.11', kubernetesVersion: '1.35.2', installerImage: pinned });
    const { metal } = await addMachines(clusterId);
    expect(await installImageOf(clusterId, metal!)).toBe(pinned);
    await h.deps.database.client.execute({ sql: 'UPDATE clusters SET talos_version = ? WHERE id = ?', args: [VERSION, clusterId] });
    expect(await installImageOf(clusterId, metal!)).toBe(pinned);
  });

  it('upgrades each machine to its own platform’s installer unless the caller names one image', async () => {
    const { clusterId } = await seedCluster(h);
    const ids = await addMachines(clusterId);
    const res = await h.call('POST', `/v1/clusters/${clusterId}/upgrade`, { body: { talosVersion: 'v1.13.10' } });
    expect(res.status).toBe(202);
    const images = res.body.run.params.images as Record<string, string>;
    expect(Object.keys(images).sort()).toEqual(Object.values(ids).sort());
    for (const [provider, id] of Object.entries(ids)) {
      expect(images[id]).toBe(`factory.talos.dev/${EXPECTED[provider]}/${VANILLA_SCHEMATIC}:v1.13.10`);
    }
  });

  it('upgrades every machine to the one image a caller names', async () => {
    const { clusterId } = await seedCluster(h);
    await addMachines(clusterId);
    const image = `factory.talos.dev/aws-installer/${VANILLA_SCHEMATIC}:v1.13.10`;
    const res = await h.call('POST', `/v1/clusters/${clusterId}/upgrade`, { body: { talosVersion: 'v1.13.10', image } });
    expect(res.status).toBe(202);
    expect(res.body.run.params.image).toBe(image);
    expect(res.body.run.params).not.toHaveProperty('images');
  });
});
