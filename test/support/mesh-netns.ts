// Helpers of the mesh's network-namespace tests: run the child script (a Talos sim or a Talos
// call, test/support/mesh-netns-child.ts) inside a namespace and read its first line.
import { fileURLToPath } from 'node:url';
import { execa, type ResultPromise } from 'execa';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CHILD = fileURLToPath(new URL('./mesh-netns-child.ts', import.meta.url));

export function inNs(ns: string, script: string, args: string[]): ResultPromise {
  return execa('ip', ['netns', 'exec', ns, process.execPath, '--import', 'tsx', script, ...args], { cwd: ROOT, reject: false, timeout: 20_000 });
}

export async function firstLine(child: ResultPromise): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = '';
    child.stdout?.on('data', (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf('\n');
      if (nl !== -1) resolve(buf.slice(0, nl));
    });
    void child.then((r) => reject(new Error(`child exited: ${String(r.stderr).slice(-500)}`)));
  });
}
