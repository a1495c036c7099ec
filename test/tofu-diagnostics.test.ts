import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveTofuBinary } from '../lib/tofu/binary.ts';
import { fromText } from '../lib/tofu/diagnostics.ts';
import { TofuCommandError, TofuWorkspace } from '../lib/tofu/workspace.ts';
import type { Harness } from './support/harness.ts';
import { MODULES_ROOT } from './support/hcl.ts';
import { startServedRunner } from './support/served-runner.ts';

const hostPath = process.env.PATH ?? '/usr/bin:/bin';
const root = await mkdtemp(path.join(tmpdir(), 'rezus-tofu-diag-'));
const binary = (await resolveTofuBinary({ env: { PATH: hostPath } })).path;
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const SECRET = 'machine-config-secret-token-4711';

/** modules/local plus whatever extra .tf a test adds, so each failure is tofu's own. */
async function moduleWith(name: string, extra: string): Promise<string> {
  const dir = path.join(root, 'modules', name);
  await cp(path.join(MODULES_ROOT, 'local'), dir, { recursive: true });
  await writeFile(path.join(dir, 'fail.tf'), extra);
  return dir;
}

function workspace(clusterId: string, moduleDir: string, dataDir = path.join(root, 'data')): TofuWorkspace {
  return new TofuWorkspace({
    binary,
    dataDir,
    tenantId: 'tenant-1',
    clusterId,
    moduleDir,
    backend: { kind: 'local', path: path.join(root, `${clusterId}.tfstate`) },
    pathEnv: hostPath,
    timeoutMs: 60_000,
  });
}

describe('a failed tofu command ends with tofu’s own diagnostic', () => {
  it('plan: the precondition’s summary and its error_message, scrubbed of secrets', async () => {
    const dir = await moduleWith(
      'precondition',
      `resource "terraform_data" "guard" {
  input = var.cluster_name
  lifecycle {
    precondition {
      condition     = var.cluster_name != "home"
      error_message = "local: no image for cp1: set providerSettings.local.default_image (cluster \${var.cluster_name}, token ${SECRET})."
    }
  }
}
`,
    );
    const ws = workspace('precondition', dir);
    ws.addSecrets(SECRET);
    await ws.init();
    const run = await ws.createRunFiles({ cluster_name: 'home', machines: { cp1: { role: 'controlplane', user_data: 'x' } } });
    try {
      const err = await ws.plan({ varFile: run.varFile }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TofuCommandError);
      const e = err as TofuCommandError;
      expect(e.message).toBe(
        'tofu plan failed (exit 1): Resource precondition failed: local: no image for cp1: set providerSettings.local.default_image (cluster home, token [redacted]).',
      );
      expect(e.diagnostics).toHaveLength(1);
    } finally {
      await run.dispose();
    }
  });

  it('init: the error tofu printed as text, not its last line', async () => {
    const dir = await moduleWith('provider', 'terraform {\n  required_providers {\n    hcloud = { source = "hetznercloud/hcloud", version = "~> 1.45" }\n  }\n}\n');
    // Providers only from an empty local mirror: init fails without reaching for any registry.
    const dataDir = path.join(root, 'data-offline');
    const mirror = path.join(root, 'empty-mirror');
    await mkdir(mirror, { recursive: true });
    await mkdir(dataDir, { recursive: true });
    await writeFile(path.join(dataDir, 'tofurc'), `provider_installation {\n  filesystem_mirror {\n    path = "${mirror}"\n  }\n}\n`);
    const err = await workspace('provider', dir, dataDir).init().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TofuCommandError);
    const e = err as TofuCommandError;
    expect(e.message).toMatch(/^tofu init failed \(exit 1\): Failed to query available provider packages: Could not retrieve the list of available versions for provider hetznercloud\/hcloud/);
    expect(e.message).not.toMatch(/\n/);
  });

  it('reads text diagnostics with and without the box tofu draws in colour', () => {
    const plain = '\nError: Failed to query available provider packages\n\nCould not retrieve the list\nof versions\n\n';
    expect(fromText(plain)).toEqual([{ summary: 'Failed to query available provider packages', detail: 'Could not retrieve the list\nof versions' }]);
    const boxed = '╷\n│ Warning: Something\n│ \n│ ignore me\n╵\n╷\n│ Error: Invalid value for variable\n│ \n│ must be between 0 and 3600.\n╵\n';
    expect(fromText(boxed)).toEqual([{ summary: 'Invalid value for variable', detail: 'must be between 0 and 3600.' }]);
  });
});

describe('a provision run that fails says why', () => {
  let h: Harness;
  let stop: () => Promise<void>;
  beforeEach(async () => {
    ({ h, close: stop } = await startServedRunner({ concurrency: 1 }));
  });
  afterEach(() => stop());

  it('ends the run with the variable validation tofu refused', async () => {
    const t = await h.call('POST', '/v1/tenants', { body: { name: 'home' } });
    // The right type passes the API; the module's own rule is tofu's to enforce.
    const c = await h.call('POST', '/v1/clusters', {
      body: { tenant: t.body.id, name: 'lab', endpoint: 'https://[2001:db8::1]:6443', providerSettings: { local: { apply_delay_seconds: -1 } } },
    });
    expect(c.status).toBe(201);
    await h.call('POST', `/v1/clusters/${c.body.id}/machines`, { body: { name: 'cp1', role: 'controlplane', provider: 'local' } });
    const res = await h.call('POST', `/v1/clusters/${c.body.id}/provision`, { body: { mode: 'plan' } });
    expect(res.status).toBe(202);
    let run = await h.deps.jobs.get(res.body.run.id);
    for (let i = 0; i < 600 && run && !['succeeded', 'failed'].includes(run.state); i++) {
      await new Promise((r) => setTimeout(r, 50));
      run = await h.deps.jobs.get(res.body.run.id);
    }
    expect(run?.state).toBe('failed');
    expect(run?.error).toMatch(/^tofu plan failed \(exit 1\): Invalid value for variable: apply_delay_seconds must be between 0 and 3600\./);
  });
});
