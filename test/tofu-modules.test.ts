import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CREDENTIAL_ENV } from '../lib/cloud/credential-env.ts';
import { resolveTofuBinary } from '../lib/tofu/binary.ts';
import { runTofu } from '../lib/tofu/executor.ts';
import {
  DATA_FACTS,
  HETZNER_REMOVED_TYPES,
  META_ARGUMENTS,
  NOVA_METADATA_KEY,
  PROVIDER_PINS,
  RESOURCE_FACTS,
  TALOS_AMI_OWNER,
  type BlockFacts,
} from './support/cloud-schema-facts.ts';
import { CLOUD_MODULES, expression, MODULES_ROOT, parseModule, type HclBlock, type ParsedModule } from './support/hcl.ts';

const hostPath = process.env.PATH ?? '/usr/bin:/bin';
const root = await mkdtemp(path.join(tmpdir(), 'rezus-tofu-mod-'));
const binary = (await resolveTofuBinary({ env: { PATH: hostPath } })).path;
const dataDir = path.join(root, 'data');
const MODULES = ['local', ...CLOUD_MODULES];
const parsed = Object.fromEntries(await Promise.all(MODULES.map(async (m) => [m, await parseModule(m)] as const))) as Record<string, ParsedModule>;

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const tofu = (subcommand: 'fmt' | 'init' | 'validate', args: string[], cwd = root) =>
  runTofu({ binary, subcommand, args, cwd, dataDir, pathEnv: hostPath, timeoutMs: 30_000 });

/** The single block of a resource or data source (each module declares each name once). */
function block(kind: 'resource' | 'data', mod: string, type: string, name = 'machine'): HclBlock {
  const b = parsed[mod]?.[kind]?.[type]?.[name]?.[0];
  if (!b) throw new Error(`${mod}: no ${kind} ${type}.${name}`);
  return b;
}
const nested = (b: HclBlock, name: string): HclBlock => ((b[name] as HclBlock[] | undefined) ?? [])[0] ?? {};
const preconditions = (b: HclBlock): { condition: string; error_message: string }[] =>
  ((nested(b, 'lifecycle').precondition as { condition: string; error_message: string }[] | undefined) ?? []).map((p) => ({
    condition: expression(p.condition),
    error_message: p.error_message,
  }));
const variable = (mod: string, name: string): HclBlock | undefined => parsed[mod]?.variable?.[name]?.[0];

/** Names used in a block (dynamic blocks count as their label) that the facts do not allow. */
function unknownNames(b: HclBlock, facts: BlockFacts, meta: string[], where: string): string[] {
  const bad: string[] = [];
  const used = Object.keys(b).filter((k) => k !== 'dynamic');
  const dynamic = (b.dynamic as Record<string, HclBlock[]> | undefined) ?? {};
  for (const k of [...used, ...Object.keys(dynamic)]) {
    if (meta.includes(k)) continue;
    if (!facts.names.includes(k)) {
      bad.push(`${where}.${k}`);
      continue;
    }
    const sub = facts.blocks?.[k];
    if (!sub) continue;
    const bodies = k in dynamic ? dynamic[k]!.flatMap((d) => (d.content as HclBlock[]) ?? []) : ((b[k] as HclBlock[]) ?? []);
    for (const body of bodies) bad.push(...unknownNames(body, sub, [], `${where}.${k}`));
  }
  return bad;
}

describe('modules/', () => {
  it('holds exactly the provider modules and a README naming their credentials', async () => {
    const dirs = (await readdir(MODULES_ROOT, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
    expect(dirs.sort()).toEqual([...MODULES].sort());
    const readme = await readFile(path.join(MODULES_ROOT, 'README.md'), 'utf8');
    for (const cred of ['HCLOUD_TOKEN', 'AWS_ACCESS_KEY_ID', 'OS_AUTH_URL', 'OCI_TENANCY_OCID']) expect(readme).toContain(cred);
  });

  it('README’s credential table lists exactly lib/cloud/credential-env.ts, and no TF_VAR_ name', async () => {
    const readme = await readFile(path.join(MODULES_ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Credentials'), readme.indexOf('## What the account must allow'));
    for (const [provider, names] of Object.entries(CREDENTIAL_ENV)) {
      const row = section.split('\n').find((l) => l.startsWith(`| \`${provider}\` |`));
      const allowed = row?.split('|')[2] ?? '';
      expect([...allowed.matchAll(/`([A-Z0-9_]+)`/g)].map((m) => m[1])).toEqual([...names]);
      for (const n of names) expect(n).not.toMatch(/^TF_VAR_/);
    }
  });

  it.each(MODULES)('%s is formatted (tofu fmt -check)', async (name) => {
    const r = await tofu('fmt', ['-check', '-diff', '-recursive', path.join(MODULES_ROOT, name)]);
    expect(r.textTail).toBe('');
    expect(r.exitCode).toBe(0);
  });

  it('fmt -check does flag a badly formatted module', async () => {
    const dir = path.join(root, 'ugly');
    await cp(path.join(MODULES_ROOT, 'local'), dir, { recursive: true });
    await writeFile(path.join(dir, 'extra.tf'), 'variable "x" {\ntype=string\n}\n');
    const r = await tofu('fmt', ['-check', '-recursive', dir]);
    expect(r.exitCode).not.toBe(0);
  });

  it.each(MODULES)('%s follows the variable and output contract', (name) => {
    const mod = parsed[name]!;
    expect(expression(variable(name, 'cluster_name')?.type)).toBe('string');
    const machines = variable(name, 'machines')!;
    expect(machines.sensitive).toBe(true);
    const type = expression(machines.type);
    for (const field of ['role', 'user_data', 'size', 'image']) expect(type).toMatch(new RegExp(`\\b${field}\\s*=`));
    const out = expression(mod.output?.machines?.[0]?.value);
    expect(out).toMatch(/ipv4\s*=/);
    expect(out).toMatch(/ipv6\s*=/);
  });

  it('local validates with tofu itself', async () => {
    const dir = path.join(root, 'validate-local');
    await cp(path.join(MODULES_ROOT, 'local'), dir, { recursive: true });
    const init = await tofu('init', ['-backend=false'], dir);
    expect(init.exitCode).toBe(0);
    const r = await tofu('validate', [], dir);
    const result = JSON.parse(r.stdout) as { valid: boolean; error_count: number };
    expect(result).toMatchObject({ valid: true, error_count: 0 });
  });
});

describe('cloud modules against the providers’ schemas (test/support/cloud-schema-facts.ts)', () => {
  it.each(CLOUD_MODULES)('%s uses only attributes and blocks its provider knows', (name) => {
    const mod = parsed[name]!;
    const bad: string[] = [];
    let checked = 0;
    for (const [kind, facts] of [['resource', RESOURCE_FACTS], ['data', DATA_FACTS]] as const) {
      for (const [type, byName] of Object.entries(mod[kind] ?? {})) {
        for (const [label, blocks] of Object.entries(byName)) {
          const f = facts[type];
          if (!f) {
            bad.push(`${kind} ${type}: no schema facts for this type`);
            continue;
          }
          for (const b of blocks) bad.push(...unknownNames(b, f, META_ARGUMENTS, `${type}.${label}`));
          checked += 1;
        }
      }
    }
    expect(bad).toEqual([]);
    expect(checked).toBeGreaterThan(0);
  });

  it('the schema check does catch a misspelt attribute and an unknown nested name', () => {
    const b: HclBlock = { ami: 'x', instance_typ: 't3.small', metadata_options: [{ http_tokens: 'required', hop_limit: 2 }] };
    expect(unknownNames(b, RESOURCE_FACTS.aws_instance!, META_ARGUMENTS, 'aws_instance.m')).toEqual([
      'aws_instance.m.instance_typ',
      'aws_instance.m.metadata_options.hop_limit',
    ]);
  });

  it.each(CLOUD_MODULES)('%s pins its provider to one major version (~>)', (name) => {
    const pin = PROVIDER_PINS[name]!;
    const required = (parsed[name]!.terraform ?? []).flatMap((t) => (t.required_providers as Record<string, { source: string; version: string }>[]) ?? []);
    const p = required.map((r) => r[pin.name]).find(Boolean);
    expect(p).toEqual({ source: pin.source, version: pin.version });
    expect(p!.version).toMatch(/^~> \d+\.\d+$/);
  });

  it.each(CLOUD_MODULES)('%s refuses a machine without an image at plan, naming the setting', (name) => {
    const type = { oci: 'oci_core_instance', openstack: 'openstack_compute_instance_v2', hetzner: 'hcloud_server', aws: 'aws_instance' }[name];
    const pre = preconditions(block('resource', name, type));
    const image = pre.find((p) => /\.image != null/.test(p.condition));
    expect(image?.error_message).toContain(`providerSettings.${name}.default_image`);
    // coalesce() with no non-null argument fails before any precondition runs, with tofu's own words.
    const locals = JSON.stringify(parsed[name]!.locals);
    expect(locals).not.toMatch(/(?<!try\()coalesce\(nonsensitive\(var\.machines\[name\]\.image\)/);
  });

  it('openstack: user_data held to Nova’s 65,535 base64 characters at plan', () => {
    const size = preconditions(block('resource', 'openstack', 'openstack_compute_instance_v2')).find((p) => p.condition.includes('user_data_b64_chars'));
    expect(size?.condition).toBe('local.user_data_b64_chars[each.key] <= local.user_data_limit');
    expect(size?.error_message).toContain('Shorten its patches');
    const locals = JSON.stringify(parsed.openstack!.locals);
    expect(locals).toContain('"user_data_limit":65535');
    expect(locals).toContain('base64encode(var.machines[name].user_data)');
  });

  it('openstack: metadata keys pass Nova’s key rule', () => {
    const keys = Object.keys(block('resource', 'openstack', 'openstack_compute_instance_v2').metadata as object);
    expect(keys.length).toBeGreaterThan(0);
    for (const k of keys) expect(k).toMatch(NOVA_METADATA_KEY);
    expect('rezus.cloud/cluster').not.toMatch(NOVA_METADATA_KEY);
  });

  it('openstack: a floating IP per machine that asks, attached to the port looked up on the first network', () => {
    const fip = block('resource', 'openstack', 'openstack_networking_floatingip_v2');
    const assoc = block('resource', 'openstack', 'openstack_networking_floatingip_associate_v2');
    const port = block('data', 'openstack', 'openstack_networking_port_v2');
    for (const b of [fip, assoc, port]) expect(expression(b.for_each)).toBe('local.with_fip');
    expect(expression(fip.pool)).toBe('var.floating_ip_pool');
    expect(expression(assoc.port_id)).toBe('data.openstack_networking_port_v2.machine[each.key].id');
    expect(expression(port.device_id)).toBe('openstack_compute_instance_v2.machine[each.key].id');
    expect(expression(port.network_id)).toBe('var.network_ids[0]');
    const pre = preconditions(block('resource', 'openstack', 'openstack_compute_instance_v2'));
    expect(pre.map((p) => p.error_message).join('\n')).toContain('providerSettings.openstack.floating_ip_pool');
    expect(pre.map((p) => p.error_message).join('\n')).toContain('providerSettings.openstack.default_size');
    expect(expression(parsed.openstack!.output?.machines?.[0]?.value)).toMatch(/floatingip_associate_v2\.machine\[name\]\.floating_ip/);
  });

  it('hetzner: a server type that exists, and IPv6-only refused without a registry mirror', () => {
    const size = variable('hetzner', 'default_size')!.default as string;
    expect(HETZNER_REMOVED_TYPES).not.toContain(size);
    expect(size).toMatch(/^c(p|a)?x\d+$/);
    const pre = preconditions(block('resource', 'hetzner', 'hcloud_server'));
    const v6 = pre.find((p) => p.condition.includes('var.enable_ipv4'));
    expect(v6?.condition).toBe('var.enable_ipv4 || var.registry_mirror');
    expect(v6?.error_message).toMatch(/ghcr\.io.*factory\.talos\.dev/);
    expect(variable('hetzner', 'registry_mirror')?.default).toBe(false);
  });

  it('aws: raw user_data held to 16,384 bytes, AMI looked up from Sidero Labs, hop limit 2, public IPv4 a setting', () => {
    const i = block('resource', 'aws', 'aws_instance');
    expect(expression(i.user_data)).toBe('var.machines[each.key].user_data');
    expect(i).not.toHaveProperty('user_data_base64');
    expect(nested(i, 'lifecycle').ignore_changes).toEqual(['${user_data}', '${ami}']);
    const size = preconditions(i).find((p) => p.condition.includes('user_data_bytes'));
    expect(size?.condition).toBe('local.user_data_bytes[each.key] <= local.user_data_limit');
    expect(JSON.stringify(parsed.aws!.locals)).toContain('"user_data_limit":16384');
    const meta = nested(i, 'metadata_options');
    expect(meta).toMatchObject({ http_tokens: 'required', http_put_response_hop_limit: 2 });
    expect(expression(i.associate_public_ip_address)).toBe('var.public_ipv4');
    const ami = block('data', 'aws', 'aws_ami', 'talos');
    expect(JSON.stringify(parsed.aws!.locals)).toContain(`"talos_ami_owner":"${TALOS_AMI_OWNER}"`);
    expect(ami.owners).toEqual(['${local.talos_ami_owner}']);
    expect(expression(ami.count)).toBe('local.lookup_ami ? 1 : 0');
  });

  it('oci: paravirtualized UEFI launch, legacy IMDS off, agent plugins off, arm shape named when its image is missing', () => {
    const i = block('resource', 'oci', 'oci_core_instance');
    expect(nested(i, 'launch_options')).toEqual({
      network_type: 'PARAVIRTUALIZED',
      boot_volume_type: 'PARAVIRTUALIZED',
      remote_data_volume_type: 'PARAVIRTUALIZED',
      firmware: 'UEFI_64',
    });
    expect(nested(i, 'instance_options')).toEqual({ are_legacy_imds_endpoints_disabled: true });
    expect(nested(i, 'agent_config')).toEqual({ are_all_plugins_disabled: true, is_management_disabled: true, is_monitoring_disabled: true });
    expect(expression((i.metadata as HclBlock).user_data)).toBe('base64encode(var.machines[each.key].user_data)');
    expect(variable('oci', 'default_size')?.default).toBe('VM.Standard.A1.Flex');
    const image = preconditions(i).find((p) => p.condition.includes('.image != null'));
    expect(image?.error_message).toContain('oracle-arm64');
  });

  it('aws: talos_version takes a release and a pre-release, as a cluster may run either', async () => {
    const { execa } = await import('execa');
    const v = variable('aws', 'talos_version')!;
    const validation = (v.validation as HclBlock[])[0]!;
    // The module's own variable block, alone in a root module: its validation is what tofu runs.
    const dir = await mkdtemp(path.join(root, 'talos-version-'));
    await writeFile(path.join(dir, 'main.tf.json'), JSON.stringify({ variable: { talos_version: { type: 'string', default: null, validation: [{ condition: `\${${expression(validation.condition)}}`, error_message: validation.error_message }] } } }));
    const plan = (value: string) => execa(binary, ['plan', '-input=false', '-no-color', '-var', `talos_version=${value}`], { cwd: dir, reject: false, env: { PATH: hostPath, TF_IN_AUTOMATION: '1' } });
    for (const ok of ['v1.13.9', 'v1.14.0-rc.1', 'v1.14.0-beta.0']) expect((await plan(ok)).exitCode, ok).toBe(0);
    for (const bad of ['1.13.9', 'v1.13', 'v1.13.9-', 'v1.13.9 ']) {
      const r = await plan(bad);
      expect(r.exitCode, bad).toBe(1);
      expect(r.stderr).toContain('talos_version must look like');
    }
  }, 60_000);

  it.each(['oci', 'aws'])('%s: enable_ipv6 has no default (a subnet without IPv6 must not fail by surprise)', (name) => {
    const v = variable(name, 'enable_ipv6')!;
    expect(expression(v.type)).toBe('bool');
    expect(v).not.toHaveProperty('default');
  });
});
