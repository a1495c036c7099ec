import { mkdtemp, mkdir, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveTofuBinary } from '../lib/tofu/binary.ts';
import type { RunEvent, TofuMessage } from '../lib/tofu/messages.ts';
import {
  BACKEND_FILE,
  machineAddressesFrom,
  moduleDirFor,
  removeStaleRunFiles,
  TofuCommandError,
  TofuWorkspace,
  workDirFor,
} from '../lib/tofu/workspace.ts';
import type { TofuWorkspaceOptions } from '../lib/tofu/workspace.ts';

const modulesRoot = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'modules');
const hostPath = process.env.PATH ?? '/usr/bin:/bin';

// Top-level so the workspaces below can be built while the suites are collected.
const root = await mkdtemp(path.join(tmpdir(), 'rezus-tofu-ws-'));
const dataDir = path.join(root, 'data');
const binary = (await resolveTofuBinary({ env: { PATH: hostPath } })).path;
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

function workspace(clusterId: string, over: Partial<TofuWorkspaceOptions> = {}): TofuWorkspace {
  return new TofuWorkspace({
    binary,
    dataDir,
    tenantId: 'tenant-1',
    clusterId,
    moduleDir: moduleDirFor(modulesRoot, 'local'),
    backend: { kind: 'local', path: path.join(root, `${clusterId}.tfstate`) },
    pathEnv: hostPath,
    graceMs: 20_000,
    timeoutMs: 60_000,
    ...over,
  });
}

const userData = (name: string) => `version: v1alpha1\nmachine:\n  type: controlplane\n  token: ${name}-secret-token-0123456789\n`;
const machines = (names: string[]) =>
  Object.fromEntries(names.map((n, i) => [n, { role: i === 0 ? 'controlplane' : 'worker', user_data: userData(n) }]));

describe('TofuWorkspace on modules/local (real tofu, local backend)', () => {
  const ws = workspace('cluster-a', { env: { FAKE_CLOUD_TOKEN: 'fake-cloud-credential-xyz987' } });
  const events: RunEvent[] = [];
  const onEvent = (e: RunEvent) => events.push(e);
  const vars = { cluster_name: 'home', machines: machines(['cp-1', 'cp-2', 'worker-1']) };

  it('lays out the work dir with the module and a generated backend block', async () => {
    await ws.init({ onEvent });
    expect(ws.dir).toBe(path.join(dataDir, 'work', 'tenant-1', 'cluster-a'));
    const files = await readdir(ws.dir);
    expect(files).toEqual(expect.arrayContaining(['main.tf', BACKEND_FILE, '.terraform']));
    expect(await readFile(path.join(ws.dir, BACKEND_FILE), 'utf8')).toContain('backend "local" {}');
    // A file left from an older module version disappears on the next sync.
    await writeFile(path.join(ws.dir, 'stale.tf'), 'this is not HCL');
    await ws.sync();
    expect(existsSync(path.join(ws.dir, 'stale.tf'))).toBe(false);
    expect(existsSync(path.join(ws.dir, '.terraform'))).toBe(true);
  });

  it('plans, applies the saved plan and reports the machine addresses', async () => {
    const run = await ws.createRunFiles(vars);
    try {
      expect((await stat(run.varFile)).mode & 0o777).toBe(0o600);
      expect((await stat(run.dir)).mode & 0o777).toBe(0o700);
      const raw: TofuMessage[] = [];
      const plan = await ws.plan({ varFile: run.varFile, outFile: run.planFile, onEvent, onMessage: (m) => raw.push(m) });
      expect(plan.hasChanges).toBe(true);
      expect(plan.summary).toEqual({ add: 3, change: 0, destroy: 0 });
      expect(plan.resources.map((r) => r.address).sort()).toEqual([
        'terraform_data.machine["cp-1"]',
        'terraform_data.machine["cp-2"]',
        'terraform_data.machine["worker-1"]',
      ]);
      expect(plan.resources.every((r) => r.action === 'create')).toBe(true);
      expect(raw[0]?.type).toBe('version');

      const shown = await ws.showPlan(run.planFile);
      expect((shown.resource_changes as unknown[]).length).toBe(3);

      const before = events.length;
      const applied = await ws.apply(run.planFile, { onEvent });
      expect(applied.summary).toEqual({ add: 3, change: 0, destroy: 0 });
      const applyEvents = events.slice(before).map((e) => e.type);
      expect(applyEvents).toContain('tofu.apply_start');
      expect(applyEvents).toContain('tofu.apply_complete');
      expect(applyEvents.filter((t) => t === 'tofu.apply_complete')).toHaveLength(3);
      const summaryEvent = events.slice(before).find((e) => e.type === 'tofu.change_summary');
      expect(summaryEvent?.data).toMatchObject({ add: 3, operation: 'apply' });
    } finally {
      await run.dispose();
    }
    expect(existsSync(run.dir)).toBe(false);

    const addrs = machineAddressesFrom(await ws.outputs());
    expect(addrs).toEqual({
      'cp-1': { ipv4: '192.0.2.10', ipv6: '2001:db8::10' },
      'cp-2': { ipv4: '192.0.2.11', ipv6: '2001:db8::11' },
      'worker-1': { ipv4: '192.0.2.12', ipv6: '2001:db8::12' },
    });
  });

  it('finds nothing to do on a second plan with the same input', async () => {
    const run = await ws.createRunFiles(vars);
    try {
      const plan = await ws.plan({ varFile: run.varFile, outFile: run.planFile, onEvent });
      expect(plan).toMatchObject({ hasChanges: false, summary: { add: 0, change: 0, destroy: 0 }, resources: [] });
      const applied = await ws.apply(run.planFile, { onEvent });
      expect(applied.summary).toEqual({ add: 0, change: 0, destroy: 0 });
    } finally {
      await run.dispose();
    }
  });

  it('updates only the machine whose user_data changed', async () => {
    const changed = { ...vars, machines: { ...vars.machines, 'cp-2': { role: 'worker', user_data: `${userData('cp-2')}# v2\n` } } };
    const run = await ws.createRunFiles(changed);
    try {
      const plan = await ws.plan({ varFile: run.varFile, outFile: run.planFile, onEvent });
      expect(plan.resources).toEqual([{ address: 'terraform_data.machine["cp-2"]', action: 'update' }]);
      // A second plan made from the same state goes stale once the first is applied.
      const other = path.join(run.dir, 'other.tfplan');
      await ws.plan({ varFile: run.varFile, outFile: other });
      await ws.apply(run.planFile, { onEvent });
      const err = await ws.apply(other).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TofuCommandError);
      expect((err as Error).message).toMatch(/stale/i);
    } finally {
      await run.dispose();
    }
  });

  it('destroys everything', async () => {
    const run = await ws.createRunFiles(vars);
    try {
      const plan = await ws.plan({ varFile: run.varFile, outFile: run.planFile, destroy: true, onEvent });
      expect(plan.summary).toEqual({ add: 0, change: 0, destroy: 3 });
      expect(plan.resources.every((r) => r.action === 'delete')).toBe(true);
      const applied = await ws.apply(run.planFile, { onEvent });
      expect(applied.summary.destroy).toBe(3);
    } finally {
      await run.dispose();
    }
    expect(machineAddressesFrom(await ws.outputs())).toEqual({});
    const state = JSON.parse(await readFile(path.join(root, 'cluster-a.tfstate'), 'utf8')) as { resources: unknown[] };
    expect(state.resources).toEqual([]);
  });

  it('never put a user_data or the credential into a run event', () => {
    expect(events.length).toBeGreaterThan(20);
    const all = JSON.stringify(events);
    for (const m of Object.values(vars.machines)) {
      expect(all).not.toContain(m.user_data);
      expect(all).not.toContain(m.user_data.split('\n')[3]!.trim());
    }
    expect(all).not.toContain('fake-cloud-credential-xyz987');
  });

  it('fails with the scrubbed diagnostic when the input is invalid', async () => {
    const run = await ws.createRunFiles({ cluster_name: 'home', machines: { x: { user_data: 'no role given here' } } });
    try {
      const err = await ws.plan({ varFile: run.varFile }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TofuCommandError);
      expect((err as TofuCommandError).canceled).toBe(false);
      expect((err as Error).message).toMatch(/tofu plan failed.*Invalid value for input variable/);
    } finally {
      await run.dispose();
    }
  });
});

describe('the shared plugin cache', () => {
  it('sees one init at a time: tofu does not make its cache safe for concurrent use', async () => {
    const log = path.join(root, 'inits.log');
    const fake = path.join(root, 'fake-tofu-init');
    // Records when each init runs; long enough that two at once would overlap.
    await writeFile(fake, `#!/bin/sh\necho "start $$" >> ${log}\nmkdir -p .terraform\nsleep 0.3\necho "end $$" >> ${log}\n`, { mode: 0o755 });
    await Promise.all(['cache-a', 'cache-b', 'cache-c'].map((id) => workspace(id, { binary: fake }).init()));
    const lines = (await readFile(log, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(6);
    // Each start is followed by its own end before the next start.
    for (let i = 0; i < lines.length; i += 2) expect(lines[i + 1]).toBe(lines[i]!.replace('start', 'end'));
  });
});

describe('cancel mid-apply', () => {
  it('stops with SIGINT, leaves a consistent state and a later apply succeeds', async () => {
    const ws = workspace('cluster-cancel');
    await ws.init();
    const slow = { cluster_name: 'home', machines: machines(['cp-1']), apply_delay_seconds: 30 };
    const run = await ws.createRunFiles(slow);
    const ac = new AbortController();
    const events: RunEvent[] = [];
    try {
      await ws.plan({ varFile: run.varFile, outFile: run.planFile });
      const err = await ws
        .apply(run.planFile, {
          signal: ac.signal,
          onEvent: (e) => {
            events.push(e);
            // Abort once the create is under way and its provisioner (the 30 s sleep) has begun,
            // so the interrupt always lands mid-apply.
            if (e.type === 'tofu.provision_start') ac.abort();
          },
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TofuCommandError);
      const e = err as TofuCommandError;
      expect(e.canceled).toBe(true);
      expect(e.result.forceKilled).toBe(false);
      const types = events.map((x) => x.type);
      expect(types.indexOf('tofu.apply_start')).toBeGreaterThanOrEqual(0);
      expect(types.indexOf('tofu.apply_start')).toBeLessThan(types.indexOf('tofu.provision_start'));
      expect(types, types.join(' ')).toContain('tofu.apply_errored');
      expect(types).not.toContain('tofu.apply_complete');
    } finally {
      await run.dispose();
    }

    // The state file is whole and records the interrupted machine as tainted.
    const state = JSON.parse(await readFile(path.join(root, 'cluster-cancel.tfstate'), 'utf8')) as {
      resources: { instances: { status?: string }[] }[];
    };
    expect(state.resources[0]?.instances[0]?.status).toBe('tainted');

    const fast = await ws.createRunFiles({ ...slow, apply_delay_seconds: 0 });
    try {
      const plan = await ws.plan({ varFile: fast.varFile, outFile: fast.planFile });
      expect(plan.resources).toEqual([{ address: 'terraform_data.machine["cp-1"]', action: 'replace' }]);
      await ws.apply(fast.planFile);
    } finally {
      await fast.dispose();
    }
    expect(machineAddressesFrom(await ws.outputs())).toEqual({ 'cp-1': { ipv4: '192.0.2.10', ipv6: '2001:db8::10' } });
  });
});

describe('child environment and leaky modules', () => {
  // A module that does everything a careless module could: echoes its input and a credential
  // from a provisioner, and outputs the machine map (user_data included) unmarked.
  const leaky = `
variable "cluster_name" {
  type = string
}
variable "machines" {
  type = map(object({ role = string, user_data = string }))
}
variable "env_file" {
  type = string
}
resource "terraform_data" "machine" {
  for_each = var.machines
  input    = each.value.user_data
  provisioner "local-exec" {
    command = "echo '\${each.value.user_data}'; echo \\"$FAKE_CLOUD_TOKEN\\"; env > \${var.env_file}"
  }
}
output "everything" {
  value = var.machines
}
output "token" {
  value     = "sensitive-output-value-123"
  sensitive = true
}
`;

  it('passes only the allowed variables to tofu, and events stay clean', async () => {
    const modDir = path.join(root, 'modules', 'leaky');
    await mkdir(modDir, { recursive: true });
    await writeFile(path.join(modDir, 'main.tf'), leaky);
    const envFile = path.join(root, 'child.env');
    const ws = workspace('cluster-leaky', {
      moduleDir: modDir,
      env: { FAKE_CLOUD_TOKEN: 'fake-cloud-credential-xyz987' },
    });
    process.env.REZUS_TEST_MUST_NOT_LEAK = 'leaked';
    const raw: TofuMessage[] = [];
    const events: RunEvent[] = [];
    const hooks = { onEvent: (e: RunEvent) => events.push(e), onMessage: (m: TofuMessage) => raw.push(m) };
    const vars = { cluster_name: 'home', machines: { a: { role: 'worker', user_data: 'leaky-user-data-abcdef' } }, env_file: envFile };
    try {
      await ws.init(hooks);
      const run = await ws.createRunFiles(vars);
      try {
        await ws.plan({ varFile: run.varFile, outFile: run.planFile, ...hooks });
        await ws.apply(run.planFile, hooks);
      } finally {
        await run.dispose();
      }
    } finally {
      delete process.env.REZUS_TEST_MUST_NOT_LEAK;
    }

    const env = Object.fromEntries(
      (await readFile(envFile, 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    // What sh itself adds (PWD, SHLVL, _) is allowed; nothing from this process may arrive.
    const allowed = new Set([
      'PATH',
      'HOME',
      'TF_IN_AUTOMATION',
      'TF_PLUGIN_CACHE_DIR',
      'TF_CLI_CONFIG_FILE',
      'CHECKPOINT_DISABLE',
      'FAKE_CLOUD_TOKEN',
      'PWD',
      'OLDPWD',
      'SHLVL',
      '_',
    ]);
    expect(Object.keys(env).filter((k) => !allowed.has(k))).toEqual([]);
    expect(env.HOME).toBe(ws.dir);
    expect(env.TF_PLUGIN_CACHE_DIR).toBe(path.join(dataDir, 'plugin-cache'));
    expect(env.TF_IN_AUTOMATION).toBe('1');
    expect(env.REZUS_TEST_MUST_NOT_LEAK).toBeUndefined();

    // The secrets really were in the raw stream, so the check below means something.
    const rawText = JSON.stringify(raw);
    expect(rawText).toContain('leaky-user-data-abcdef');
    expect(rawText).toContain('fake-cloud-credential-xyz987');
    const all = JSON.stringify(events);
    expect(all).not.toContain('leaky-user-data-abcdef');
    expect(all).not.toContain('fake-cloud-credential-xyz987');
    expect(all).not.toContain('sensitive-output-value-123');
    expect(events.some((e) => e.type === 'tofu.outputs')).toBe(true);
  });
});

describe('paths and leftovers', () => {
  it('refuses ids that would leave the work root', () => {
    expect(() => workDirFor(dataDir, '..', 'c')).toThrow(/invalid tenant id/);
    expect(() => workDirFor(dataDir, 't', 'a/../../b')).toThrow(/invalid cluster id/);
    expect(() => moduleDirFor(modulesRoot, '../etc')).toThrow(/invalid provider/);
  });

  it('removes run files a crashed process left behind', async () => {
    const ws = workspace('cluster-crash');
    const left = await ws.createRunFiles({ cluster_name: 'x', machines: {} });
    const kept = await readdir(path.join(dataDir, 'runs'));
    expect(kept).toContain(path.basename(left.dir));
    expect(await removeStaleRunFiles(dataDir)).toBeGreaterThanOrEqual(1);
    expect(existsSync(left.dir)).toBe(false);
    expect(await removeStaleRunFiles(path.join(root, 'no-such-dir'))).toBe(0);
  });
});
