// Runs every benchmark one after another (each prints its own ratio).
import { execa } from 'execa';
import { join } from 'node:path';

const here = import.meta.dirname;
// The benches themselves; collect-sims.ts and sim-fleet.ts are their simulator child and its client,
// cpu-profile.ts and run-wait.ts helpers they share.
const files = ['config-gen.ts', 'provision.ts', 'push.ts', 'collect.ts', 'upgrade.ts', 'talos-sim-fleet.ts', 'pki.ts', 'mtls-chain.ts', 'runner.ts', 'edge.ts'];
for (const f of files) {
  console.log(`\n== bench/${f}`);
  await execa(join(here, '..', 'node_modules', '.bin', 'tsx'), [join(here, f)], { stdio: 'inherit' });
}
