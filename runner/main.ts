import { loadConfig } from './config.ts';
import { startHost } from './host.ts';

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
