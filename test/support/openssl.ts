import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';

const OPENSSL = '/usr/bin/openssl';

/** Runs `openssl verify` on a leaf (or self-signed CA) against a CA file; returns exit code and output. */
export async function opensslVerify(caPem: string, certPem: string, extraArgs: string[] = []): Promise<{ ok: boolean; output: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'rezus-pki-'));
  try {
    await writeFile(join(dir, 'ca.pem'), caPem);
    await writeFile(join(dir, 'cert.pem'), certPem);
    const result = await execa(OPENSSL, ['verify', ...extraArgs, '-CAfile', join(dir, 'ca.pem'), join(dir, 'cert.pem')], {
      reject: false,
      timeout: 10_000,
    });
    return { ok: result.exitCode === 0, output: `${result.stdout}\n${result.stderr}` };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `openssl x509 -text` of a certificate. */
export async function opensslText(certPem: string): Promise<string> {
  const result = await execa(OPENSSL, ['x509', '-noout', '-text'], { input: certPem, timeout: 10_000 });
  return result.stdout;
}
