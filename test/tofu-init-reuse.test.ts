import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveTofuBinary } from '../lib/tofu/binary.ts';
import { TofuWorkspace } from '../lib/tofu/workspace.ts';

const hostPath = process.env.PATH ?? '/usr/bin:/bin';
const root = await mkdtemp(path.join(tmpdir(), 'rezus-tofu-init-'));
const binary = (await resolveTofuBinary({ env: { PATH: hostPath } })).path;
const moduleDir = path.join(root, 'module');
await cp(path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'modules', 'local'), moduleDir, { recursive: true });
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const workspace = (statePath: string) =>
  new TofuWorkspace({ binary, dataDir: path.join(root, 'data'), tenantId: 't1', clusterId: 'c1', moduleDir, backend: { kind: 'local', path: statePath }, pathEnv: hostPath, timeoutMs: 60_000 });

describe('TofuWorkspace.init keeps an initialised work dir', () => {
  it('skips init when nothing it depends on changed, and runs it when the module, the backend or the lock file did', async () => {
    const state = path.join(root, 'a.tfstate');
    expect(await workspace(state).init()).toBe(true);
    // A new workspace object over the same work dir, as the next run makes.
    expect(await workspace(state).init()).toBe(false);

    await writeFile(path.join(moduleDir, 'extra.tf'), 'locals {\n  bench = 1\n}\n');
    expect(await workspace(state).init()).toBe(true);
    expect(await workspace(state).init()).toBe(false);

    expect(await workspace(path.join(root, 'b.tfstate')).init()).toBe(true);
    expect(await workspace(path.join(root, 'b.tfstate')).init()).toBe(false);

    const ws = workspace(path.join(root, 'b.tfstate'));
    await writeFile(path.join(ws.dir, '.terraform.lock.hcl'), '# changed by hand\n');
    expect(await ws.init()).toBe(true);
  });

  it('runs init again when the stamp is gone (e.g. a failed init removed it)', async () => {
    const state = path.join(root, 'c.tfstate');
    const ws = workspace(state);
    await ws.init();
    await rm(path.join(ws.dir, '.terraform', 'rezus-init.sha256'));
    expect(await workspace(state).init()).toBe(true);
    expect(await workspace(state).init()).toBe(false);
  });
});
