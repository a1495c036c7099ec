// Real coturn (Debian `coturn`) in STUN-only mode on loopback, for the mesh's STUN tests.
import { createSocket } from 'node:dgram';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { stunBinding } from '../../lib/mesh/stun.ts';

/** A port nothing listens on right now (TCP probe; coturn binds UDP and TCP on it). */
export async function freeUdpPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

export interface Coturns {
  ports: number[];
  stop(): Promise<void>;
}

/**
 * Starts `count` STUN servers on 127.0.0.1, each ready once it answers a Binding (bounded). With
 * `netns`, they run in that namespace on `host`, on ports from 3478 up (a fresh namespace has them
 * free), and are not waited for: nothing here can reach them (the caller's check retries).
 */
export async function startCoturns(count: number, netns?: { ns: string; host: string }): Promise<Coturns> {
  const dir = await mkdtemp(join(tmpdir(), 'rz-stun-'));
  const procs: ResultPromise[] = [];
  const ports: number[] = [];
  const stop = async () => {
    for (const p of procs) {
      p.kill('SIGTERM');
      await p;
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (let n = 0; n < count; n++) {
      const port = netns ? 3478 + n : await freeUdpPort();
      const args = [
        '-n', `--listening-ip=${netns?.host ?? '127.0.0.1'}`, `--listening-port=${port}`, '--stun-only', '--no-tls', '--no-dtls', '--no-cli',
        `--pidfile=${join(dir, `${port}.pid`)}`, `--userdb=${join(dir, `${port}.db`)}`, '--log-file=stdout', '--simple-log',
      ];
      procs.push(netns ? execa('ip', ['netns', 'exec', netns.ns, 'turnserver', ...args], { reject: false, stdin: 'ignore' }) : execa('turnserver', args, { reject: false, stdin: 'ignore' }));
      if (!netns) await waitAnswering(port);
      ports.push(port);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { ports, stop };
}

async function waitAnswering(port: number): Promise<void> {
  const sock = createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  try {
    for (let i = 0; i < 40; i++) {
      try {
        await stunBinding(sock, { host: '127.0.0.1', port }, 250);
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    throw new Error('coturn did not answer');
  } finally {
    sock.close();
  }
}
