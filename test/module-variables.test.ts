import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { withClusterDefaults } from '../lib/cloud/cluster-defaults.ts';
import { MODULE_VARIABLES } from '../lib/cloud/module-variables.ts';
import { composeRootModule } from '../runner/jobs/provision/root-module.ts';
import { checkProviderSettings } from '../lib/cloud/provider-settings.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';
import { renderModuleVariables } from './support/hcl.ts';

const generated = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'lib', 'cloud', 'module-variables.ts');

describe('lib/cloud/module-variables.ts', () => {
  it('is in sync with the modules’ variables.tf (UPDATE_MODULE_VARIABLES=1 regenerates it)', async () => {
    const want = await renderModuleVariables();
    if (process.env.UPDATE_MODULE_VARIABLES === '1') await writeFile(generated, want);
    expect(await readFile(generated, 'utf8')).toBe(want);
  });

  it('knows each module’s required settings and never lists what RezusCloud sets itself', () => {
    expect(MODULE_VARIABLES.aws?.region).toEqual({ type: 'string', required: true });
    expect(MODULE_VARIABLES.aws?.enable_ipv6?.required).toBe(true);
    expect(MODULE_VARIABLES.hetzner?.firewall_ids?.type).toBe('list(number)');
    for (const vars of Object.values(MODULE_VARIABLES)) {
      expect(Object.keys(vars)).not.toContain('machines');
      expect(Object.keys(vars)).not.toContain('cluster_name');
    }
  });
});

describe('checkProviderSettings', () => {
  it('names an unknown setting and the closest known one', () => {
    expect(checkProviderSettings({ hetzner: { defualt_image: '123' } })).toEqual([
      { path: 'providerSettings.hetzner.defualt_image', message: 'the hetzner module has no setting defualt_image; did you mean default_image?' },
    ]);
    // Too far from any name for a suggestion to help.
    expect(checkProviderSettings({ aws: { colour: 'blue' } })[0]?.message).toBe('the aws module has no setting colour');
  });

  it('refuses values of the wrong type and accepts the right ones', () => {
    expect(checkProviderSettings({ aws: { enable_ipv6: 'yes', root_volume_gb: '20', region: 'eu-west-1' } })).toEqual([
      { path: 'providerSettings.aws.enable_ipv6', message: 'must be true or false' },
      { path: 'providerSettings.aws.root_volume_gb', message: 'must be a number' },
    ]);
    expect(checkProviderSettings({ hetzner: { firewall_ids: ['12', '34'], enable_ipv4: false }, openstack: { network_ids: ['a'] } })).toEqual([]);
    expect(checkProviderSettings({ hetzner: { firewall_ids: ['web'] } })[0]?.message).toBe('must be a list of numbers');
  });
});

describe('withClusterDefaults', () => {
  it('gives the AWS AMI lookup the cluster’s Talos version unless the user chose one', () => {
    const root = composeRootModule(['aws', 'local'], withClusterDefaults({ aws: { region: 'eu-west-1' } }, { talosVersion: 'v1.13.9' })) as {
      module: Record<string, Record<string, unknown>>;
    };
    expect(root.module.aws).toMatchObject({ region: 'eu-west-1', talos_version: 'v1.13.9' });
    expect(root.module.local).not.toHaveProperty('talos_version');
    expect(withClusterDefaults({ aws: { talos_version: 'v1.12.11' } }, { talosVersion: 'v1.13.9' }).aws).toEqual({ talos_version: 'v1.12.11' });
  });
});

describe('providerSettings through the API', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await createHarness();
  });
  afterEach(async () => h.close());

  it('refuses a typo at create and at patch, and changes nothing', async () => {
    const { tenantId, clusterId } = await seedCluster(h);
    const create = await h.call('POST', '/v1/clusters', {
      body: { tenant: tenantId, name: 'c2', endpoint: 'https://10.0.0.1:6443', providerSettings: { aws: { regoin: 'eu-west-1' } } },
    });
    expect(create.status).toBe(400);
    expect(create.body.error.code).toBe('invalid_request');
    expect(create.body.error.message).toBe('providerSettings.aws.regoin: the aws module has no setting regoin; did you mean region?');
    expect((await h.call('GET', '/v1/clusters')).body.clusters).toHaveLength(1);

    const before = (await h.call('GET', `/v1/clusters/${clusterId}`)).body;
    const patch = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { providerSettings: { oci: { enable_ipv6: 1 } } } });
    expect(patch.status).toBe(400);
    expect(patch.body.error.message).toBe('providerSettings.oci.enable_ipv6: must be true or false');
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body).toEqual(before);

    const ok = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { providerSettings: { oci: { enable_ipv6: false, default_ocpus: 4 } } } });
    expect(ok.status).toBe(200);
  });

  it('takes a map setting (Hetzner labels) with label-like keys, and refuses a map where the module wants another type', async () => {
    const { clusterId } = await seedCluster(h);
    const labels = { env: 'home', 'rezus.cloud/rack': 'a' };
    const ok = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { providerSettings: { hetzner: { labels } } } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body.settings.providerSettings.hetzner.labels).toEqual(labels);

    const before = (await h.call('GET', `/v1/clusters/${clusterId}`)).body;
    for (const [body, message] of [
      [{ hetzner: { labels: { '${file("/etc/passwd")}': 'x' } } }, /^providerSettings\.hetzner\.labels\./],
      [{ hetzner: { labels: { env: 1 } } }, /^providerSettings\.hetzner\.labels\.env/],
      [{ hetzner: { location: { a: 'b' } } }, /^providerSettings\.hetzner\.location: must be a string$/],
    ] as const) {
      const bad = await h.call('PATCH', `/v1/clusters/${clusterId}`, { body: { providerSettings: body } });
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toMatch(message);
    }
    expect((await h.call('GET', `/v1/clusters/${clusterId}`)).body).toEqual(before);
  });
});

describe('a tenant\'s settings in the root module', () => {
  it('reach the module as the very strings given: tofu evaluates no template in them (no file() on this host)', async () => {
    const { mkdtemp, mkdir, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { execa } = await import('execa');
    const given = ['${file("/etc/hostname")}', '%{ if true }x%{ endif }', 'plain $${kept} and $$ and %'];
    const dir = await mkdtemp(path.join(tmpdir(), 'rz-root-'));
    try {
      // A stand-in for providers/aws that hands its settings straight back as outputs.
      await mkdir(path.join(dir, 'providers', 'aws'), { recursive: true });
      await writeFile(
        path.join(dir, 'providers', 'aws', 'main.tf.json'),
        JSON.stringify({
          variable: { cluster_name: {}, machines: {}, region: {}, subnet_ids: {}, labels: {} },
          output: { machines: { value: { region: '${var.region}', subnets: '${var.subnet_ids}', labels: '${var.labels}' } } },
        }),
      );
      const labels = { env: given[0]!, 'rezus.cloud/owner': given[1]! };
      await writeFile(path.join(dir, 'main.tf.json'), JSON.stringify(composeRootModule(['aws'], { aws: { region: given[0]!, subnet_ids: given.slice(1), labels } })));
      const env = { ...process.env, TF_IN_AUTOMATION: '1', CHECKPOINT_DISABLE: '1' };
      await execa('terraform', ['init', '-input=false', '-no-color'], { cwd: dir, env });
      await execa('terraform', ['apply', '-auto-approve', '-input=false', '-no-color', '-var', 'cluster_name=c', '-var', 'machines_aws={}'], { cwd: dir, env });
      const out = JSON.parse((await execa('terraform', ['output', '-json', 'machines'], { cwd: dir, env })).stdout) as { region: string; subnets: string[]; labels: Record<string, string> };
      expect(out).toEqual({ region: given[0], subnets: given.slice(1), labels });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
