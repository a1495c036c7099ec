// Machine-config generation throughput against the cost of the key pairs alone, measured in the same run.
import { generateKeyPairSync } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { renderMachineConfig } from '../lib/talos/config.ts';
import { generateSecrets } from '../lib/talos/secrets.ts';

const COUNT = 100;

function timeIt(fn: () => void): number {
  const start = performance.now();
  fn();
  return performance.now() - start;
}

const secretsStart = performance.now();
const secrets = await generateSecrets();
const secretsMs = performance.now() - secretsStart;

// First render compiles the JSON schema; report it apart from the steady state.
const warmMs = timeIt(() => {
  renderMachineConfig({ secrets, clusterName: 'bench', endpoint: 'https://[2001:db8::1]:6443', role: 'controlplane', installDisk: '/dev/sda' });
});

const configsMs = timeIt(() => {
  for (let i = 0; i < COUNT; i++) {
    renderMachineConfig({
      secrets,
      clusterName: 'bench',
      endpoint: 'https://[2001:db8::1]:6443',
      role: i % 3 === 0 ? 'controlplane' : 'worker',
      hostname: `node-${i}`,
      installDisk: '/dev/sda',
      addresses: [`2001:db8::${(i + 16).toString(16)}`, `192.0.2.${i + 1}`],
      machinePatches: [{ machine: { sysctls: { 'net.core.somaxconn': String(1024 + i) } } }],
    });
  }
});

const floorMs = timeIt(() => {
  for (let i = 0; i < COUNT; i++) {
    generateKeyPairSync('ed25519');
    generateKeyPairSync('ec', { namedCurve: 'P-256' });
  }
});

const perSecond = (ms: number) => (COUNT / ms) * 1000;
console.log(`generateSecrets (4 CAs + RSA-4096 SA key): ${secretsMs.toFixed(0)} ms`);
console.log(`first render (includes schema compile):    ${warmMs.toFixed(0)} ms`);
console.log(`${COUNT} machine configs (render+patch+validate): ${configsMs.toFixed(1)} ms = ${perSecond(configsMs).toFixed(0)} configs/s`);
console.log(`floor: ${COUNT} x (Ed25519 + ECDSA P-256 key pair): ${floorMs.toFixed(1)} ms = ${perSecond(floorMs).toFixed(0)} pairs/s`);
console.log(`ratio config time / key-pair floor: ${(configsMs / floorMs).toFixed(2)}x`);
