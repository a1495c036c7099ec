// Parent side of bench/collect-sims.ts: starts the simulator child and sends it requests over IPC.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { SimRequest } from './collect-sims.ts';

/** A child process hosting the sims, so a bench measures the product's CPU, not the simulator's. */
export function startSimFleet(): <T>(req: SimRequest) => Promise<T> {
  const child = fork(fileURLToPath(new URL('./collect-sims.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  let nextId = 0;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  child.on('message', (m: { id: number; result?: unknown; error?: string }) => {
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.error !== undefined) p?.reject(new Error(m.error));
    else p?.resolve(m.result);
  });
  return <T>(req: SimRequest) =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      child.send({ id, req });
    });
}
