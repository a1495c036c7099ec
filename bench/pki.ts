/**
 * Admin certificate issuance as a cold collect pass does it: every cluster has its own OS CA
 * (Ed25519) and Kubernetes CA (ECDSA P-256), and the pass issues one client certificate from
 * each, so no CA is seen twice. Same run, same CAs, both paths:
 *   old: @peculiar/x509 (test/support/peculiar-pki.ts, the issuance pki.ts used to do)
 *   new: lib/talos/pki.ts (DER built by lib/talos/x509-*.ts, signed with node:crypto)
 * Rounds alternate old and new so drift (turbo, neighbours) falls on both. CPU is this process's
 * user+system time; both paths are synchronous enough that wall and CPU agree.
 * Usage: npx tsx bench/pki.ts [leaves per round, default 100] [rounds, default 5]
 */
import { performance } from 'node:perf_hooks';
import { createCa, issueLeaf, type CertAndKey } from '../lib/talos/pki.ts';

const leaves = Math.max(2, Number(process.argv[2] ?? 100));
const rounds = Math.max(1, Number(process.argv[3] ?? 5));
const clusters = Math.ceil(leaves / 2);

// The old path's module load (@peculiar/x509, its ASN.1 stack, reflect-metadata), paid once per
// process, timed on its own; the new path loads nothing beyond node:crypto.
const loadStart = process.cpuUsage();
const loadWall = performance.now();
const { peculiarCreateCa, peculiarIssueLeaf } = await import('../test/support/peculiar-pki.ts');
const load = { wallMs: performance.now() - loadWall, cpuMs: ((u) => (u.user + u.system) / 1000)(process.cpuUsage(loadStart)) };

type Issue = (ca: CertAndKey, subject: { organizations: string[]; commonName?: string }) => Promise<unknown>;
const paths: Record<'old' | 'new', { leaf: Issue; ca: (algorithm: 'ed25519' | 'ecdsa-p256') => Promise<CertAndKey> }> = {
  old: {
    leaf: (ca, subject) => peculiarIssueLeaf({ ca, usage: 'client', subject }),
    ca: (algorithm) => peculiarCreateCa({ algorithm, subject: { organizations: ['talos'] } }),
  },
  new: {
    leaf: (ca, subject) => issueLeaf({ ca, usage: 'client', subject }),
    ca: (algorithm) => createCa({ algorithm, subject: { organizations: ['talos'] } }),
  },
};

async function freshCas(): Promise<{ os: CertAndKey; k8s: CertAndKey }[]> {
  const out = [];
  for (let i = 0; i < clusters; i++) {
    out.push({ os: await createCa({ algorithm: 'ed25519', subject: { organizations: ['talos'] } }), k8s: await createCa({ algorithm: 'ecdsa-p256', subject: { organizations: ['kubernetes'] } }) });
  }
  return out;
}

async function measure(run: () => Promise<void>): Promise<{ wallMs: number; cpuMs: number }> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  await run();
  const wallMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { wallMs, cpuMs: (used.user + used.system) / 1000 };
}

// Warms both paths (JIT, lazily built tables) before anything is measured.
const warm = await freshCas();
for (const name of ['old', 'new'] as const) for (const { os, k8s } of warm.slice(0, 5)) {
  await paths[name].leaf(os, { organizations: ['os:admin'] });
  await paths[name].leaf(k8s, { organizations: ['system:masters'], commonName: 'admin' });
}

const totals = { old: { leafCpu: 0, leafWall: 0, caCpu: 0 }, new: { leafCpu: 0, leafWall: 0, caCpu: 0 } };
for (let round = 0; round < rounds; round++) {
  for (const name of (round % 2 === 0 ? ['old', 'new'] : ['new', 'old']) as ('old' | 'new')[]) {
    // fresh CAs per path and round: as in a cold pass, no issuer is cached yet
    const cas = await freshCas();
    const leafTime = await measure(async () => {
      for (const { os, k8s } of cas) {
        await paths[name].leaf(os, { organizations: ['os:admin'] });
        await paths[name].leaf(k8s, { organizations: ['system:masters'], commonName: 'admin' });
      }
    });
    const caTime = await measure(async () => {
      for (let i = 0; i < 10; i++) await paths[name].ca(i % 2 ? 'ecdsa-p256' : 'ed25519');
    });
    totals[name].leafCpu += leafTime.cpuMs;
    totals[name].leafWall += leafTime.wallMs;
    totals[name].caCpu += caTime.cpuMs;
  }
}

const issued = clusters * 2 * rounds;
const per = (ms: number, n: number): string => (ms / n).toFixed(3);
console.log(`node ${process.version}; ${rounds} rounds x ${clusters * 2} leaves (${clusters} clusters: one Ed25519 and one P-256 client cert each), alternating order`);
console.log(`old path module load, once per process (@peculiar/x509 + asn1 stack; includes tsx transforming the reference file): ${load.wallMs.toFixed(1)} ms wall, ${load.cpuMs.toFixed(1)} ms CPU`);
for (const name of ['old', 'new'] as const) {
  const t = totals[name];
  console.log(`${name}: leaf ${per(t.leafCpu, issued)} ms CPU/cert (${per(t.leafWall, issued)} ms wall), CA ${per(t.caCpu, 10 * rounds)} ms CPU/CA`);
}
console.log(`ratio old/new: leaf CPU ${(totals.old.leafCpu / totals.new.leafCpu).toFixed(1)}x, leaf wall ${(totals.old.leafWall / totals.new.leafWall).toFixed(1)}x, CA CPU ${(totals.old.caCpu / totals.new.caCpu).toFixed(1)}x`);
console.log(`a cold collect pass of 50 clusters (100 leaves): old ${((totals.old.leafCpu / issued) * 100).toFixed(0)} ms CPU, new ${((totals.new.leafCpu / issued) * 100).toFixed(0)} ms CPU`);
