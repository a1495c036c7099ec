// Two network namespaces joined by a veth pair, for real WireGuard tunnels in tests. Names carry a
// random tag, so parallel runs never meet, and everything is removed by cleanup().
import { randomBytes } from 'node:crypto';
import { accessSync, constants } from 'node:fs';
import { execa } from 'execa';

export interface NetnsPair {
  tag: string;
  a: string;
  b: string;
  /** underlay addresses on the veth pair */
  aAddr: string;
  bAddr: string;
  /** `['ip', 'netns', 'exec', ns]`, to run a command inside a namespace */
  execIn(ns: string): string[];
  cleanup(): Promise<void>;
}

/** Why these tests cannot run here, or null when they can. */
export function netnsSkipReason(): string | null {
  if (process.getuid?.() !== 0) return 'needs root to create network namespaces';
  try {
    accessSync('/dev/net/tun', constants.R_OK | constants.W_OK);
  } catch {
    return 'needs /dev/net/tun for wireguard-go';
  }
  return null;
}

async function ip(args: string[]): Promise<void> {
  await execa('ip', args, { timeout: 10_000 });
}

export async function createNetnsPair(): Promise<NetnsPair> {
  const tag = randomBytes(3).toString('hex');
  const a = `rzt-${tag}-a`;
  const b = `rzt-${tag}-b`;
  const va = `rzv${tag}a`;
  const vb = `rzv${tag}b`;
  // TEST-NET-2 inside private namespaces: never routed anywhere.
  const aAddr = '198.51.100.1';
  const bAddr = '198.51.100.2';
  const created: string[] = [];
  const cleanup = async () => {
    for (const ns of created.reverse()) await execa('ip', ['netns', 'del', ns], { reject: false, timeout: 10_000 });
  };
  try {
    for (const ns of [a, b]) {
      await ip(['netns', 'add', ns]);
      created.push(ns);
      await ip(['-n', ns, 'link', 'set', 'lo', 'up']);
    }
    await ip(['-n', a, 'link', 'add', va, 'type', 'veth', 'peer', 'name', vb, 'netns', b]);
    await ip(['-n', a, 'address', 'add', `${aAddr}/24`, 'dev', va]);
    await ip(['-n', b, 'address', 'add', `${bAddr}/24`, 'dev', vb]);
    await ip(['-n', a, 'link', 'set', va, 'up']);
    await ip(['-n', b, 'link', 'set', vb, 'up']);
  } catch (err) {
    await cleanup();
    throw err;
  }
  return { tag, a, b, aAddr, bAddr, execIn: (ns) => ['ip', 'netns', 'exec', ns], cleanup };
}
