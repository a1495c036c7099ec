import { loadConfig } from './config.ts';
import { startHost } from './host.ts';

// Everything the runner creates (database, backups, run files, tofu's errored.tfstate) holds
// secrets or state: owner-only, whatever umask the container starts with.
process.umask(0o077);

const config = (() => {
  try {
    return loadConfig(process.env);
  } catch (err) {
    console.error(String(err instanceof Error ? err.message : err));
    process.exit(2);
  }
})();

const host = await startHost(config);
let signals = 0;
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    if (++signals > 1) process.exit(1);
    host.stop().then(
      () => process.exit(0),
      (err) => {
        console.error('shutdown failed', err);
        process.exit(1);
      },
    );
  });
}
