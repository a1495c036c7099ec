/**
 * One mTLS handshake to a configured node, as a pass makes one per node: what presenting the admin
 * certificate's chain explicitly (lib/talos/api/client-chain.ts, in createTalosSecureContext) saves
 * against handing OpenSSL the certificate alone, which then rebuilds and re-verifies the same chain
 * at every handshake. Same run, same certificates (an Ed25519 OS CA, as Talos makes), same node:
 *   baseline: a context given the CA, the admin certificate and its key (the client before)
 *   product:  createTalosSecureContext(ca, cert, key)
 * The node (it presents its chain and requires a client certificate from the CA) runs in a child
 * process and is the same for both, so the CPU counted, this process's, is the client's own cost,
 * as a collect pass or a push pays it per node. Rounds alternate the two.
 * Usage: npx tsx bench/mtls-chain.ts [handshakes per round, default 400] [rounds, default 6]
 */
import { fork } from 'node:child_process';
import { createSecureContext, createServer, connect, type SecureContext } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { createTalosSecureContext } from '../lib/talos/api/client.ts';
import { createCa, issueLeaf, toNodeKeyPem } from '../lib/talos/pki.ts';
import { median } from './median.ts';

const NODE_FLAG = '--apid-node';

interface NodeCerts {
  cert: string;
  key: string;
  ca: string;
}

if (process.argv[2] === NODE_FLAG) {
  // The node: sends a byte once it has taken the client's certificate, then hangs up.
  process.once('message', (m: NodeCerts) => {
    const server = createServer({ cert: m.cert, key: m.key, ca: m.ca, requestCert: true, rejectUnauthorized: true }, (socket) => {
      socket.on('error', () => {});
      socket.end('x');
    });
    server.listen(0, '127.0.0.1', () => process.send!((server.address() as AddressInfo).port));
    process.once('disconnect', () => process.exit(0));
  });
} else {
  const perRound = Math.max(10, Number(process.argv[2] ?? 400));
  const rounds = Math.max(1, Number(process.argv[3] ?? 6));
  const CONCURRENT = 8;

  const ca = await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } });
  const serving = await issueLeaf({ ca, usage: 'server', subject: { commonName: 'node' }, ipAddresses: ['127.0.0.1'] });
  const admin = await issueLeaf({ ca, usage: 'client', subject: { organizations: ['os:admin'] } });
  const node = fork(import.meta.filename, [NODE_FLAG], { execArgv: ['--import', 'tsx'] });
  const port = await new Promise<number>((resolve) => {
    node.once('message', (p) => resolve(p as number));
    node.send({ cert: serving.certPem + ca.certPem, key: toNodeKeyPem(serving.keyPem), ca: ca.certPem } satisfies NodeCerts);
  });

  const contexts: Record<'baseline' | 'product', SecureContext> = {
    baseline: createSecureContext({ ca: ca.certPem, cert: admin.certPem, key: toNodeKeyPem(admin.keyPem) }),
    product: createTalosSecureContext(ca.certPem, admin.certPem, admin.keyPem),
  };

  function handshake(secureContext: SecureContext): Promise<void> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port, secureContext, checkServerIdentity: () => undefined });
      // The node's byte arrives once it has taken our certificate: the handshake is done at both ends.
      socket.once('data', () => {
        socket.destroy();
        resolve();
      });
      socket.once('error', reject);
    });
  }

  async function round(secureContext: SecureContext): Promise<number> {
    const cpu = process.cpuUsage();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENT }, async () => {
        while (next++ < perRound) await handshake(secureContext);
      }),
    );
    const used = process.cpuUsage(cpu);
    return (used.user + used.system) / 1000 / perRound;
  }

  for (const name of ['baseline', 'product'] as const) await round(contexts[name]); // JIT, lazily loaded providers
  const results: Record<'baseline' | 'product', number[]> = { baseline: [], product: [] };
  for (let r = 0; r < rounds; r++) {
    for (const name of r % 2 ? (['product', 'baseline'] as const) : (['baseline', 'product'] as const)) results[name].push(await round(contexts[name]));
  }
  node.disconnect();

  const base = median(results.baseline);
  const ours = median(results.product);
  // This VM's speed drifts between rounds; a pair of adjacent rounds shares the drift.
  const saved = median(results.baseline.map((b, i) => b - results.product[i]!));
  console.log(`mTLS handshakes to an apid-like node (Ed25519 OS CA) in another process, ${perRound} per round, ${CONCURRENT} at a time, ${rounds} rounds each`);
  console.log(`client CPU per handshake: baseline (certificate alone) median ${base.toFixed(3)} ms; product (chain presented) median ${ours.toFixed(3)} ms`);
  console.log(`saved ${(saved * 1000).toFixed(0)} µs per handshake (median of paired rounds); ratio product/baseline ${(ours / base).toFixed(2)}`);
}
