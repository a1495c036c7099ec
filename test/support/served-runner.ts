import { executors, onRunsInterrupted } from '../../runner/jobs/registry.ts';
import { createWorker } from '../../runner/worker.ts';
import { createHarness, type Harness } from './harness.ts';
import { listen } from './serve.ts';

/**
 * A harness whose app listens on loopback (tofu's http backend calls it) with a worker running
 * every registered executor: what a provision run needs end to end.
 */
export async function startServedRunner(opts: { concurrency?: number } = {}): Promise<{ h: Harness; url: string; close(): Promise<void> }> {
  const h = await createHarness();
  const server = await listen(h);
  const worker = createWorker({
    deps: h.deps,
    executors: executors(),
    workerId: 'w1',
    leaseMs: 5000,
    concurrency: opts.concurrency ?? 2,
    pollMs: 50,
    onInterrupted: (ids) => onRunsInterrupted(h.deps, ids),
  });
  worker.start();
  return {
    h,
    url: server.url,
    close: async () => {
      await worker.stop(0);
      await server.close();
      await h.close();
    },
  };
}
