// Configuration, logging and signals of the runner process; main.ts imports it.
import { createLogger } from '../lib/log.ts';
import { routeProcessWarnings } from '../lib/process-warnings.ts';
import { loadConfig } from './config.ts';

// Everything the runner creates (database, backups, run files, tofu's errored.tfstate) holds
// secrets or state: owner-only, whatever umask the container starts with.
process.umask(0o077);

const config = (() => {
  try {
    return loadConfig(process.env);
  } catch (err) {
    createLogger().error(String(err instanceof Error ? err.message : err));
    process.exit(2);
  }
})();
const log = createLogger(config.logLevel);
routeProcessWarnings(log);

// Imported after the warning route is set, so warnings raised while loading modules are JSON too.
const { startHost } = await import('./host.ts');
const host = await startHost(config);
let signals = 0;
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    if (++signals > 1) process.exit(1);
    host.stop().then(
      () => process.exit(0),
      (err) => {
        log.error('shutdown failed', { error: err instanceof Error ? err.message : String(err) });
        process.exit(1);
      },
    );
  });
}
