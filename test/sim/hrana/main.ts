// CLI: node --import tsx test/sim/hrana/main.ts --port 8080 --db data/sim.db [--token T] [--host H]
// The token may also come from HRANA_SIM_TOKEN, which keeps it out of the process list.
import { parseArgs } from 'node:util';
import { startHranaSim } from './server.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8080' },
    host: { type: 'string', default: '127.0.0.1' },
    db: { type: 'string' },
    token: { type: 'string' },
    'stream-idle-ms': { type: 'string' },
  },
});

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

if (!values.db) fail('usage: main.ts --db <file> [--port N] [--host H] [--token T] [--stream-idle-ms N]');
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port must be 0..65535, got ${values.port}`);
const streamIdleMs = values['stream-idle-ms'] === undefined ? undefined : Number(values['stream-idle-ms']);
if (streamIdleMs !== undefined && !(streamIdleMs > 0)) fail('--stream-idle-ms must be a positive number');

const sim = await startHranaSim({
  dbPath: values.db,
  port,
  host: values.host,
  authToken: values.token ?? process.env.HRANA_SIM_TOKEN,
  streamIdleMs,
});
console.log(`hrana sim listening on ${sim.url} (db ${values.db})`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void sim.close().then(() => process.exit(0));
  });
}
