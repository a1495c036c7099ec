// Runs every benchmark in this folder one after another (each prints its own ratio).
import { execa } from 'execa';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';

const here = import.meta.dirname;
const files = (await readdir(here)).filter((f) => f.endsWith('.ts') && f !== 'run-all.ts').sort();
for (const f of files) {
  console.log(`\n== bench/${f}`);
  await execa(join(here, '..', 'node_modules', '.bin', 'tsx'), [join(here, f)], { stdio: 'inherit' });
}
