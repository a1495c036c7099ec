import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveTofuBinary } from '../lib/tofu/binary.ts';
import { runTofu } from '../lib/tofu/executor.ts';

const modulesRoot = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'modules');
const hostPath = process.env.PATH ?? '/usr/bin:/bin';
const root = await mkdtemp(path.join(tmpdir(), 'rezus-tofu-mod-'));
const binary = (await resolveTofuBinary({ env: { PATH: hostPath } })).path;
const dataDir = path.join(root, 'data');
const MODULES = ['local', 'oci', 'openstack', 'hetzner', 'aws'];

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const tofu = (subcommand: 'fmt' | 'init' | 'validate', args: string[], cwd = root) =>
  runTofu({ binary, subcommand, args, cwd, dataDir, pathEnv: hostPath, timeoutMs: 30_000 });

async function moduleText(name: string): Promise<string> {
  const dir = path.join(modulesRoot, name);
  const files = (await readdir(dir)).filter((f) => f.endsWith('.tf'));
  return (await Promise.all(files.map((f) => readFile(path.join(dir, f), 'utf8')))).join('\n');
}

describe('modules/', () => {
  it('holds exactly the provider modules and a README naming their credentials', async () => {
    const dirs = (await readdir(modulesRoot, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
    expect(dirs.sort()).toEqual([...MODULES].sort());
    const readme = await readFile(path.join(modulesRoot, 'README.md'), 'utf8');
    for (const cred of ['HCLOUD_TOKEN', 'AWS_ACCESS_KEY_ID', 'OS_AUTH_URL', 'OCI_TENANCY_OCID']) expect(readme).toContain(cred);
  });

  it.each(MODULES)('%s is formatted (tofu fmt -check)', async (name) => {
    const r = await tofu('fmt', ['-check', '-diff', '-recursive', path.join(modulesRoot, name)]);
    expect(r.textTail).toBe('');
    expect(r.exitCode).toBe(0);
  });

  it('fmt -check does flag a badly formatted module', async () => {
    const dir = path.join(root, 'ugly');
    await cp(path.join(modulesRoot, 'local'), dir, { recursive: true });
    await writeFile(path.join(dir, 'extra.tf'), 'variable "x" {\ntype=string\n}\n');
    const r = await tofu('fmt', ['-check', '-recursive', dir]);
    expect(r.exitCode).not.toBe(0);
  });

  it.each(MODULES)('%s follows the variable and output contract', async (name) => {
    const text = await moduleText(name);
    expect(text).toMatch(/variable "cluster_name" \{\s*type\s*=\s*string/);
    const machinesVar = /variable "machines" \{[\s\S]*?\n\}/.exec(text)?.[0] ?? '';
    expect(machinesVar).toMatch(/sensitive\s*=\s*true/);
    for (const field of ['role', 'user_data', 'size', 'image']) expect(machinesVar).toMatch(new RegExp(`\\b${field}\\s*=`));
    const output = /output "machines" \{[\s\S]*?\n\}/.exec(text)?.[0] ?? '';
    expect(output).toMatch(/ipv4\s*=/);
    expect(output).toMatch(/ipv6\s*=/);
    expect(text).toMatch(/var\.machines\[each\.key\]\.user_data/);
  });

  it.each([
    ['oci', /user_data\s*=\s*base64encode\(var\.machines\[each\.key\]\.user_data\)/, /assign_ipv6ip\s*=/],
    ['openstack', /config_drive\s*=\s*true/, /access_ip_v6/],
    ['hetzner', /user_data\s*=\s*var\.machines\[each\.key\]\.user_data/, /ipv6_enabled\s*=\s*true/],
    ['aws', /user_data_base64\s*=\s*base64encode\(/, /ipv6_address_count\s*=/],
  ])('%s passes user_data the way its cloud expects and enables IPv6', async (name, userData, ipv6) => {
    const text = await moduleText(name);
    expect(text).toMatch(userData);
    expect(text).toMatch(ipv6);
  });

  it('local validates with tofu itself', async () => {
    const dir = path.join(root, 'validate-local');
    await cp(path.join(modulesRoot, 'local'), dir, { recursive: true });
    const init = await tofu('init', ['-backend=false'], dir);
    expect(init.exitCode).toBe(0);
    const r = await tofu('validate', [], dir);
    const result = JSON.parse(r.stdout) as { valid: boolean; error_count: number };
    expect(result).toMatchObject({ valid: true, error_count: 0 });
  });
});
