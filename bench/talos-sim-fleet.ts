/**
 * How cheap are simulated Talos nodes? Starts a fleet of configured sims in one process and
 * calls Version on each over mTLS. Baseline: the same work for a single node, same run.
 * Usage: tsx bench/talos-sim-fleet.ts [count]
 */
import { createTalosClient, type TalosApiClient } from '../lib/talos/api/index.ts';
import { createTestOsCa, issueTestClientCert, startSimNode, testMachineConfig, type SimTalosNode } from '../test/sim/talos/index.ts';

const count = Number(process.argv[2] ?? 200);

async function run(n: number): Promise<{ startMs: number; callMs: number }> {
  const ca = await createTestOsCa();
  const admin = await issueTestClientCert(ca);
  const config = testMachineConfig({ ca });
  const t0 = performance.now();
  const sims: SimTalosNode[] = await Promise.all(Array.from({ length: n }, () => startSimNode({ initialConfig: config })));
  const t1 = performance.now();
  const clients: TalosApiClient[] = sims.map((s) => createTalosClient({ mode: 'configured', address: s.address, ca: ca.certPem, cert: admin.certPem, key: admin.keyPem }));
  await Promise.all(clients.map((c) => c.version({ deadlineMs: 30_000 })));
  const t2 = performance.now();
  for (const c of clients) c.close();
  await Promise.all(sims.map((s) => s.stop()));
  return { startMs: t1 - t0, callMs: t2 - t1 };
}

await run(1); // warm up proto loading and the shared maintenance certificate
const base = await run(1);
const rss0 = process.memoryUsage().rss;
const fleet = await run(count);
const rssMb = (process.memoryUsage().rss - rss0) / 1024 / 1024;
const perStart = fleet.startMs / count;
const perCall = fleet.callMs / count;
console.log(`sims: ${count}`);
console.log(`start: ${fleet.startMs.toFixed(0)} ms total, ${perStart.toFixed(2)} ms/node; single node ${base.startMs.toFixed(2)} ms; ratio ${(perStart / base.startMs).toFixed(2)}`);
console.log(`first mTLS Version: ${fleet.callMs.toFixed(0)} ms total, ${perCall.toFixed(2)} ms/node; single node ${base.callMs.toFixed(2)} ms; ratio ${(perCall / base.callMs).toFixed(2)}`);
console.log(`rss growth after stop: ${rssMb.toFixed(1)} MiB`);
