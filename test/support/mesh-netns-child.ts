// Run inside a test network namespace (`ip netns exec ns node --import tsx this.ts …`):
//   sim <host>                 a Talos sim listening on <host>; prints {address, fingerprint}; stops when stdin closes
//   call <address> <fingerprint>  one Talos Version call over pinned TLS; prints {tag}
//   stun <bind> <host:port,host:port>  the hub's NAT check from <bind>, retried until both servers answer (bounded); prints the report
import { createTalosClient } from '../../lib/talos/api/index.ts';
import { detectNat, parseStunServers } from '../../lib/mesh/stun.ts';
import { startSimNode } from '../sim/talos/index.ts';

const [mode, a, b] = process.argv.slice(2);
if (mode === 'sim') {
  const sim = await startSimNode({ host: a });
  process.stdout.write(`${JSON.stringify({ address: sim.address, fingerprint: sim.maintenanceFingerprint })}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => void sim.stop().then(() => process.exit(0)));
} else if (mode === 'call') {
  const client = createTalosClient({ mode: 'maintenance', address: a as string, fingerprint: b as string });
  try {
    const v = await client.version();
    process.stdout.write(`${JSON.stringify({ tag: v.tag })}\n`);
  } finally {
    client.close();
  }
  process.exit(0);
} else if (mode === 'stun') {
  // The STUN servers may still be starting: a check they did not both answer is made again.
  let report = await detectNat(parseStunServers(b as string), { bindAddress: a as string, timeoutMs: 500 });
  for (let i = 0; i < 20 && report.mapping === 'unknown'; i++) report = await detectNat(parseStunServers(b as string), { bindAddress: a as string, timeoutMs: 500 });
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(0);
} else {
  process.stderr.write('usage: sim <host> | call <address> <fingerprint> | stun <bind> <servers>\n');
  process.exit(2);
}
