import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveTofuBinary, TofuBinaryNotFoundError } from '../lib/tofu/binary.ts';

let dir: string;
const hostPath = process.env.PATH ?? '';

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'rezus-tofu-bin-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function script(name: string, body: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, `#!/bin/sh\n${body}\n`);
  await chmod(file, 0o755);
  return file;
}

describe('resolveTofuBinary', () => {
  it('finds tofu or terraform on PATH and reports its version', async () => {
    const bin = await resolveTofuBinary({ env: { PATH: hostPath } });
    expect(['tofu', 'terraform']).toContain(path.basename(bin.path));
    expect(bin.flavor).toBe(path.basename(bin.path));
    expect(bin.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('prefers REZUS_TOFU_BIN over PATH and reads the version it prints', async () => {
    const fake = await script('my-tofu', `echo '{"terraform_version":"1.9.7","platform":"linux_amd64"}'`);
    const bin = await resolveTofuBinary({ env: { PATH: hostPath, REZUS_TOFU_BIN: fake } });
    expect(bin).toEqual({ path: fake, flavor: 'tofu', version: '1.9.7' });
  });

  it('reports terraform flavor for a terraform binary named by the override', async () => {
    const fake = await script('terraform-1.11', `echo '{"terraform_version":"1.11.0"}'`);
    const bin = await resolveTofuBinary({ env: { PATH: '', REZUS_TOFU_BIN: fake } });
    expect(bin.flavor).toBe('terraform');
    expect(bin.version).toBe('1.11.0');
  });

  it('finds `tofu` before `terraform` on PATH', async () => {
    const pathDir = await mkdtemp(path.join(dir, 'path-'));
    for (const name of ['tofu', 'terraform']) {
      const f = path.join(pathDir, name);
      await writeFile(f, `#!/bin/sh\necho '{"terraform_version":"1.8.0"}'\n`);
      await chmod(f, 0o755);
    }
    const bin = await resolveTofuBinary({ env: { PATH: pathDir } });
    expect(bin.path).toBe(path.join(pathDir, 'tofu'));
    expect(bin.flavor).toBe('tofu');
  });

  it('fails clearly when nothing is found', async () => {
    const err = await resolveTofuBinary({ env: { PATH: path.join(dir, 'nowhere') } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TofuBinaryNotFoundError);
    expect((err as Error).message).toMatch(/neither `tofu` nor `terraform` is on PATH.*REZUS_TOFU_BIN/);
  });

  it('fails clearly when the override is not executable', async () => {
    const notExec = path.join(dir, 'plain-file');
    await writeFile(notExec, 'x');
    await expect(resolveTofuBinary({ env: { PATH: hostPath, REZUS_TOFU_BIN: notExec } })).rejects.toThrow(
      /REZUS_TOFU_BIN=.*plain-file is not an executable file/,
    );
    await expect(
      resolveTofuBinary({ env: { PATH: hostPath, REZUS_TOFU_BIN: path.join(dir, 'missing') } }),
    ).rejects.toBeInstanceOf(TofuBinaryNotFoundError);
  });

  it('rejects a binary that does not print a JSON version', async () => {
    const fake = await script('tofu-broken', 'echo OpenTofu v1.8.0');
    await expect(resolveTofuBinary({ env: { PATH: '', REZUS_TOFU_BIN: fake } })).rejects.toThrow(/did not print JSON/);
  });
});
