import { createTalosClient, createTalosSecureContext } from './lib/talos/api/index.ts';
import { readNode } from './runner/jobs/collect/talos-read.ts';
import { createTestOsCa, issueTestClientCert, startSimNode, testMachineConfig } from './test/sim/talos/index.ts';
const ca = await createTestOsCa();
const admin = await issueTestClientCert(ca);
const sims = await Promise.all(Array.from({length: 100}, () => startSimNode({ initialConfig: testMachineConfig({ ca }) })));
const ctx = createTalosSecureContext(ca.certPem, admin.certPem, admin.keyPem);
for (let round = 0; round < 2; round++) {
const cs = sims.map(s => createTalosClient({ mode: 'configured', address: s.address, ca: ca.certPem, cert: admin.certPem, key: admin.keyPem, secureContext: ctx }));
for (let pass = 0; pass < 4; pass++) {
  const c0 = process.cpuUsage(); const t0 = performance.now();
  await Promise.all(cs.map((c) => readNode(c, 'controlplane', { deadlineMs: 10000 })));
  const cpu = process.cpuUsage(c0);
  console.log(process.env['TAG'], 'round', round, 'pass', pass, 'wall', Math.round(performance.now() - t0), 'cpu ms/node (client+sim)', ((cpu.user + cpu.system) / 1000 / 100).toFixed(2));
}
for (const c of cs) c.close();
}
await Promise.all(sims.map(s => s.stop()));
