import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { generateValidators, VALIDATORS_FILE } from '../scripts/gen-talos-validators.ts';
import { checkPortable, findImportCycles } from '../scripts/portable-bundle.ts';

describe('the portable part', () => {
  it('bundles for a Workers-like target without any Node-only module', async () => {
    const report = await checkPortable('functions/app.ts');
    expect(report.violations).toEqual([]);
    expect(report.bytes).toBeGreaterThan(0);
  }, 60_000);

  it('flags a Node-only import that arrives through lib/', async () => {
    // The runner's registry reaches tofu (execa, node:fs) and the Talos client (node:http2).
    const report = await checkPortable('runner/jobs/registry.ts');
    expect(report.violations.some((v) => v.startsWith('execa <- '))).toBe(true);
    expect(report.violations).toContain('node:http2 <- lib/talos/api/node-channel.ts');
  }, 60_000);

  it('has no import cycles among its own modules, type imports included', () => {
    expect(findImportCycles(['functions', 'lib', 'runner', 'db'])).toEqual([]);
  });

  it('ships Talos schema validators generated from the checked-in schema', () => {
    // Stale output would validate configs against a schema the repository no longer has.
    expect(readFileSync(VALIDATORS_FILE, 'utf8')).toBe(generateValidators());
  }, 60_000);
});
