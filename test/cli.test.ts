import { execa } from 'execa';
import { mkdtemp, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { startRunner } from './support/runner-process.ts';
import { httpCaller } from './support/api-caller.ts';

// End to end: the `rezus` command as a user runs it, against the real runner process (real
// database, worker and terraform on modules/local), with its own HOME and config file.

const CLI = join(import.meta.dirname, '..', 'cli', 'main.ts');
const ADMIN = 'cli-test-admin-token-0123456789abcdef';

let dir: string;
let home: string;
let runner: Awaited<ReturnType<typeof startRunner>>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rezus-cli-'));
  home = join(dir, 'home');
  await mkdir(home);
  runner = await startRunner({
    REZUS_DATA_DIR: join(dir, 'data'),
    REZUS_PORT: '0',
    REZUS_HOST: '127.0.0.1',
    REZUS_ADMIN_TOKEN: ADMIN,
    // No collect pass in the middle of the runs this suite counts.
    REZUS_COLLECT_CRON: '0 0 1 1 *',
    REZUS_SHUTDOWN_GRACE_S: '2',
    REZUS_WORKER_CONCURRENCY: '1',
  });
}, 30_000);

afterAll(async () => {
  // The last test leaves a 30 s apply running; its graceful stop is not under test here, so the
  // whole process group (runner, terraform, sleep) goes at once.
  if (runner?.child.pid) process.kill(-runner.child.pid, 'SIGKILL');
  await runner?.child;
  await rm(dir, { recursive: true, force: true });
});

const configFile = () => join(home, '.config', 'rezus', 'config.yaml');

function rezus(args: string[], opts: { input?: string; env?: Record<string, string> } = {}) {
  // tsx as a loader in the one node process (its bin would start a second one): the source, no build.
  return execa(process.execPath, ['--import', 'tsx', CLI, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: home, ...opts.env },
    extendEnv: false,
    reject: false,
    input: opts.input ?? '',
    timeout: 60_000,
  });
}

async function api(path: string, init: { method?: string; body?: unknown } = {}) {
  const call = httpCaller(runner.url, ADMIN);
  return (await call(init.method ?? 'GET', path, { body: init.body })).body as Record<string, unknown>;
}

async function machinesOf(clusterName: string) {
  const { clusters } = (await api('/v1/clusters')) as { clusters: { id: string; name: string }[] };
  const id = clusters.find((c) => c.name === clusterName)!.id;
  return ((await api(`/v1/clusters/${id}/machines`)) as { machines: { name: string; patches: unknown[]; ipv6: string | null }[] }).machines;
}

interface ApplyReport {
  clusters: { cluster: string; changes: { action: string; kind: string; name: string; fields?: string[] }[]; summary: Record<string, number> }[];
}
const applyJson = (stdout: string) => JSON.parse(stdout) as ApplyReport;

function spec(opts: { name: string; w1MaxPods?: string; delay?: number | string }) {
  return stringify({
    apiVersion: 'rezus.cloud/v1',
    kind: 'Cluster',
    metadata: { name: opts.name, tenant: 'home' },
    spec: {
      endpoint: 'https://[2001:db8::1]:6443',
      kubernetesVersion: 'v1.36.3',
      providerSettings: { local: { apply_delay_seconds: opts.delay ?? 0 } },
      machines: [
        { name: 'cp1', role: 'controlplane', provider: 'local' },
        { name: 'w1', role: 'worker', provider: 'local', patches: [{ machine: { kubelet: { extraArgs: { 'max-pods': opts.w1MaxPods ?? '120' } } } }] },
      ],
    },
  });
}

async function writeSpec(file: string, text: string) {
  const path = join(dir, file);
  await writeFile(path, text);
  return path;
}

describe('rezus CLI against a real runner', () => {
  it('login refuses a wrong token and stores nothing; the right one lands in a 0600 config', async () => {
    const bad = await rezus(['login', runner.url], { input: 'not-the-token\n' });
    expect(bad.exitCode).toBe(3);
    expect(bad.stderr).toContain('missing or invalid bearer token');
    await expect(stat(configFile())).rejects.toThrow();

    const ok = await rezus(['login', runner.url, '--name', 'home-lab'], { input: `${ADMIN}\n` });
    expect(ok.exitCode, ok.stderr).toBe(0);
    expect((await stat(configFile())).mode & 0o777).toBe(0o600);
    const config = parse(await readFile(configFile(), 'utf8'));
    expect(config).toEqual({ current: 'home-lab', contexts: { 'home-lab': { url: runner.url, token: ADMIN } } });

    const list = await rezus(['context', 'list']);
    expect(list.stdout).toMatch(/\*\s+home-lab\s+http:\/\/127\.0\.0\.1/);
  });

  it('apply -f creates the tenant, cluster and machines; applying it again changes nothing', async () => {
    const file = await writeSpec('lab.yaml', spec({ name: 'lab' }));
    const first = await rezus(['apply', '-f', file, '-o', 'json']);
    expect(first.exitCode, first.stderr).toBe(0);
    expect(applyJson(first.stdout).clusters[0]!.changes.map((c) => `${c.action} ${c.kind} ${c.name}`)).toEqual([
      'create tenant home',
      'create cluster lab',
      'create machine cp1',
      'create machine w1',
    ]);
    // The diff shown before the change, on stderr since stdout carries JSON.
    expect(first.stderr).toContain('+ machine lab/w1 (new)');

    const { clusters } = (await api('/v1/clusters')) as { clusters: { id: string; name: string; kubernetesVersion: string; settings: Record<string, unknown>; updatedAt: number }[] };
    expect(clusters.map((c) => c.name)).toEqual(['lab']);
    const lab = clusters[0]!;
    expect(lab.kubernetesVersion).toBe('1.36.3');
    expect(lab.settings.providerSettings).toEqual({ local: { apply_delay_seconds: 0 } });
    const { machines } = (await api(`/v1/clusters/${lab.id}/machines`)) as { machines: { name: string; patches: unknown[]; updatedAt: number }[] };
    expect(machines.find((m) => m.name === 'w1')!.patches).toEqual([{ machine: { kubelet: { extraArgs: { 'max-pods': '120' } } } }]);

    const again = await rezus(['apply', '-f', file, '-o', 'json']);
    expect(again.exitCode, again.stderr).toBe(0);
    const report = applyJson(again.stdout).clusters[0]!;
    expect(report.summary).toMatchObject({ create: 0, update: 0, delete: 0, unchanged: 3 });
    expect(again.stderr).toContain('no changes');
    const after = (await api(`/v1/clusters/${lab.id}`)) as { updatedAt: number };
    expect(after.updatedAt).toBe(lab.updatedAt);
  });

  it('get cluster -o yaml prints a spec that apply -f takes without a change', async () => {
    const got = await rezus(['get', 'cluster', 'lab', '-o', 'yaml']);
    expect(got.exitCode, got.stderr).toBe(0);
    const doc = parse(got.stdout);
    expect(doc).toMatchObject({ apiVersion: 'rezus.cloud/v1', kind: 'Cluster', metadata: { name: 'lab', tenant: 'home' } });
    expect(doc.spec.machines.map((m: { name: string }) => m.name)).toEqual(['cp1', 'w1']);
    const file = await writeSpec('exported.yaml', got.stdout);
    const res = await rezus(['apply', '-f', file, '-o', 'json']);
    expect(res.exitCode, res.stderr).toBe(0);
    expect(applyJson(res.stdout).clusters[0]!.summary).toMatchObject({ create: 0, update: 0, delete: 0 });
  });

  it('a changed machine patch is exactly one update, shown as a diff', async () => {
    const file = await writeSpec('lab.yaml', spec({ name: 'lab', w1MaxPods: '150' }));
    const dry = await rezus(['apply', '-f', file, '--dry-run']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/^~ machine lab\/w1$/m);
    expect(dry.stdout).toMatch(/^-\s+max-pods: "120"$/m);
    expect(dry.stdout).toMatch(/^\+\s+max-pods: "150"$/m);

    const res = await rezus(['apply', '-f', file, '-o', 'json']);
    expect(res.exitCode, res.stderr).toBe(0);
    const changes = applyJson(res.stdout).clusters[0]!.changes.filter((c) => c.action !== 'unchanged');
    expect(changes).toEqual([{ action: 'update', kind: 'machine', name: 'w1', fields: ['patches'] }]);
    const machines = await machinesOf('lab');
    expect(machines.find((m) => m.name === 'w1')!.patches).toEqual([{ machine: { kubelet: { extraArgs: { 'max-pods': '150' } } } }]);
  });

  it('reports a bad spec as a usage error and the API\'s refusal with its message', async () => {
    const broken = await writeSpec('broken.yaml', spec({ name: 'lab' }).replace('role: worker', 'role: boss'));
    const usage = await rezus(['apply', '-f', broken]);
    expect(usage.exitCode).toBe(2);
    expect(usage.stderr).toMatch(/spec\.machines\.1\.role/);

    const badPatch = await writeSpec('bad-patch.yaml', spec({ name: 'lab' }).replace('kubelet:', 'network:').replace(/extraArgs:[^\n]*\n[^\n]*max-pods[^\n]*/, 'hostname: w1'));
    const refused = await rezus(['apply', '-f', badPatch]);
    expect(refused.exitCode).toBe(3);
    expect(refused.stderr).toMatch(/error: patches: machine\.network.*\(invalid_config, HTTP 400\)/);

    const jump = await rezus(['upgrade-kubernetes', 'lab', '--to', '1.38.0']);
    expect(jump.exitCode).toBe(3);
    expect(jump.stderr).toMatch(/unsupported upgrade path 1\.36->1\.38.*\(unsupported_upgrade_path, HTTP 409\)/);

    const early = await rezus(['sync-manifests', 'lab', '--dry-run', '--no-prune', '--recreate', '--inventory-policy', 'AdoptAll']);
    expect(early.exitCode).toBe(3);
    expect(early.stderr).toMatch(/bootstrap it first.*\(not_bootstrapped, HTTP 409\)/);
    const policy = await rezus(['sync-manifests', 'lab', '--inventory-policy', 'Mine']);
    expect(policy.exitCode).toBe(2);
    expect(policy.stderr).toContain('AdoptIfNoInventory, MustMatch, AdoptAll');

    const missing = await rezus(['describe', 'cluster', 'nope']);
    expect(missing.exitCode).toBe(3);
    expect(missing.stderr).toContain('cluster "nope" not found');
  });

  let planRunId = '';
  it('plan --wait and apply --wait run real terraform on the local provider', async () => {
    const plan = await rezus(['plan', 'lab', '--wait', '-o', 'json']);
    expect(plan.exitCode, plan.stderr).toBe(0);
    const planned = JSON.parse(plan.stdout);
    expect(planned).toMatchObject({ kind: 'provision', state: 'succeeded', result: { summary: { add: 2, change: 0, destroy: 0 } } });
    expect(plan.stderr).toContain('tofu.planned_change');
    planRunId = planned.id;

    const apply = await rezus(['apply', 'lab', '--wait']);
    expect(apply.exitCode, apply.stderr).toBe(0);
    expect(apply.stdout).toContain('tofu.apply_complete');
    expect(apply.stdout).toMatch(/run run_\w+ \(provision\) succeeded/);
    // The addresses tofu reported, as the table shows them.
    const table = await rezus(['get', 'machines', '-c', 'lab']);
    expect(table.stdout).toMatch(/^NAME\s+ROLE\s+PROVIDER\s+STATE\s+ADDRESS\s+IPV4\s+IPV6/);
    expect(table.stdout).toMatch(/^cp1\s+controlplane\s+local\s+provisioned\s+-\s+192\.0\.2\.10\s+2001:db8::10\b/m);
    expect(table.stdout).toMatch(/^w1\s+worker\s+local\s+provisioned\s+-\s+192\.0\.2\.11\s+2001:db8::11\b/m);

    // The state moved since that plan: the API's 409 and its reason reach the user.
    const stale = await rezus(['approve', planRunId]);
    expect(stale.exitCode).toBe(3);
    expect(stale.stderr).toContain('the state changed since this plan was made');
  });

  it('logs -f follows a run to its end', async () => {
    const started = await rezus(['destroy', 'lab', '--yes', '-o', 'json']);
    expect(started.exitCode, started.stderr).toBe(0);
    const run = JSON.parse(started.stdout) as { id: string };
    const logs = await rezus(['logs', '-f', run.id]);
    expect(logs.exitCode, logs.stderr).toBe(0);
    const lines = logs.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/queued/);
    expect(logs.stdout).toContain('2 destroyed');
    expect(lines.at(-1)).toBe(`run ${run.id} succeeded`);
  });

  it('kubeconfig --merge keeps the other contexts of $HOME/.kube/config; talosconfig --merge likewise', async () => {
    const kubeconfig = join(home, '.kube', 'config');
    await mkdir(join(home, '.kube'), { recursive: true });
    await writeFile(
      kubeconfig,
      stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'other', cluster: { server: 'https://other.example:6443' } }],
        users: [{ name: 'other', user: { token: 'keep-me' } }],
        contexts: [{ name: 'other', context: { cluster: 'other', user: 'other' } }],
        'current-context': 'other',
      }),
    );
    const res = await rezus(['kubeconfig', 'lab', '--merge']);
    expect(res.exitCode, res.stderr).toBe(0);
    const merged = parse(await readFile(kubeconfig, 'utf8'));
    expect(merged.contexts.map((c: { name: string }) => c.name)).toEqual(['other', 'admin@lab']);
    expect(merged.users.find((u: { name: string }) => u.name === 'other').user.token).toBe('keep-me');
    expect(merged.clusters.find((c: { name: string }) => c.name === 'lab').cluster.server).toBe('https://[2001:db8::1]:6443');
    expect(merged['current-context']).toBe('admin@lab');
    expect((await stat(kubeconfig)).mode & 0o777).toBe(0o600);

    // Merging again refreshes the entry instead of adding a second one.
    expect((await rezus(['kubeconfig', 'lab', '--merge'])).exitCode).toBe(0);
    expect(parse(await readFile(kubeconfig, 'utf8')).contexts).toHaveLength(2);

    await mkdir(join(home, '.talos'), { recursive: true });
    await writeFile(join(home, '.talos', 'config'), stringify({ context: 'old', contexts: { old: { endpoints: ['192.0.2.1'] } } }));
    expect((await rezus(['talosconfig', 'lab', '--merge'])).exitCode).toBe(0);
    const talos = parse(await readFile(join(home, '.talos', 'config'), 'utf8'));
    expect(talos.context).toBe('lab');
    expect(Object.keys(talos.contexts).sort()).toEqual(['lab', 'old']);
    expect(talos.contexts.lab.crt).toBeTruthy();
  });

  it('has --help on commands and a bash completion generated from them', async () => {
    const help = await rezus(['apply', '--help']);
    expect(help.exitCode).toBe(0);
    expect(help.stdout).toContain('--prune');
    const wrong = await rezus(['plan']);
    expect(wrong.exitCode).toBe(2);
    expect(wrong.stderr).toContain("missing required argument 'cluster'");

    const script = await rezus(['completion', 'bash']);
    expect(script.exitCode).toBe(0);
    const file = await writeSpec('rezus.bash', script.stdout);
    const complete = await execa('bash', ['-c', `source ${file}; COMP_WORDS=(rezus get cl); COMP_CWORD=2; _rezus_complete; echo "\${COMPREPLY[@]}"`]);
    expect(complete.stdout.split(' ').sort()).toEqual(['cl', 'cluster', 'clusters']);
    const top = await execa('bash', ['-c', `source ${file}; COMP_WORDS=(rezus kube); COMP_CWORD=1; _rezus_complete; echo "\${COMPREPLY[@]}"`]);
    expect(top.stdout).toBe('kubeconfig');
  });

  it('a failing run exits 1, a canceled one 4', async () => {
    // The API accepts any number, the module's validation refuses this one: the plan run fails.
    const bad = await writeSpec('lab-bad.yaml', spec({ name: 'lab', w1MaxPods: '150', delay: 99999 }));
    const res = await rezus(['apply', '-f', bad, '--provision']);
    expect(res.exitCode).toBe(1);
    expect(res.stdout).toMatch(/Invalid value for (input )?variable/);
    expect(res.stdout).toMatch(/provision: plan failed/);

    // The one worker is held by a 30 s apply, so the next run stays queued, and a queued run cancels at once.
    const { clusters } = (await api('/v1/clusters')) as { clusters: { id: string }[] };
    const lab = clusters[0]!.id;
    await api(`/v1/clusters/${lab}`, { method: 'PATCH', body: { providerSettings: { local: { apply_delay_seconds: 30 } } } });
    await api(`/v1/clusters/${lab}/provision`, { method: 'POST', body: { mode: 'apply' } });
    const queued = await rezus(['backup', '-o', 'json']);
    expect(queued.exitCode, queued.stderr).toBe(0);
    const run = JSON.parse(queued.stdout) as { id: string; state: string };
    expect(run.state).toBe('queued');
    await api(`/v1/runs/${run.id}/cancel`, { method: 'POST' });
    const followed = await rezus(['logs', '-f', run.id]);
    expect(followed.exitCode).toBe(4);
    expect(followed.stdout).toContain(`run ${run.id} canceled`);
  });
});
