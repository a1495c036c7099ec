import { RunAbort as Abort, type ExecutorRegistry } from '../lib/jobs/executor.ts';
import type { Run, RunEventInput } from '../lib/jobs/types.ts';
import { errorMessage } from '../lib/errors.ts';
import type { Deps } from '../functions/context.ts';
import { createEventWriter } from './event-writer.ts';

export interface Worker {
  start(): void;
  /**
   * Stops claiming and ends the runs within budgetMs: they may finish for its first half, then the
   * rest are aborted with the time left as their bound to stop; they end `interrupted`.
   */
  stop(budgetMs: number): Promise<void>;
  readonly active: number;
}

export function createWorker(opts: {
  deps: Deps;
  executors: ExecutorRegistry<Deps>;
  workerId: string;
  leaseMs: number;
  concurrency: number;
  pollMs?: number;
  /** Clean-up for runs found with an expired lease (their worker died). */
  onInterrupted?: (runIds: string[]) => Promise<void>;
}): Worker {
  const { deps, executors, workerId, leaseMs, concurrency } = opts;
  const pollMs = opts.pollMs ?? 500;
  // A run is only reaped once its lease has run out: looking at every poll (a poll may be a few
  // milliseconds) finds nothing more, so a dead worker's run ends at most this much later.
  const reapEveryMs = Math.min(leaseMs / 10, 1_000);
  let reapedAt = Number.NEGATIVE_INFINITY;
  const kinds = Object.keys(executors);
  const active = new Map<string, { controller: AbortController; done: Promise<void> }>();
  let stopping = false;
  let loop: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  const offWake = deps.bus.onWake(() => wake?.());
  // A cancel made through this process's API reaches the executor at once.
  const offCancel = deps.bus.onCancel((runId) => active.get(runId)?.controller.abort(new Abort('cancel')));

  async function execute(run: Run): Promise<void> {
    const controller = new AbortController();
    const executor = executors[run.kind]!;
    // The lease is only as fresh as the last heartbeat the database accepted. A process that was
    // paused (SIGSTOP, a suspended VM) longer than its lease must assume a peer reaped the run and
    // stop its work at once, before it even asks the database.
    let leaseValidUntil = Date.now() + leaseMs;
    const beat = setInterval(() => {
      if (Date.now() > leaseValidUntil) controller.abort(new Abort('lease-lost'));
      const sent = Date.now();
      deps.jobs.heartbeat(run.id, workerId, leaseMs).then(
        (hb) => {
          if (!hb.owned) controller.abort(new Abort('lease-lost'));
          else {
            leaseValidUntil = sent + leaseMs;
            if (hb.cancelRequested) controller.abort(new Abort('cancel'));
          }
        },
        (err) => deps.log.warn('heartbeat failed', { run: run.id, error: errorMessage(err) }),
      );
    }, Math.max(200, Math.floor(leaseMs / 3)));
    // Refused only once the run ended elsewhere (reaped): this worker no longer owns it.
    const events = createEventWriter<RunEventInput & { at: number }>((batch) => deps.jobs.appendEvents(run.id, batch), () => controller.abort(new Abort('lease-lost')));
    const entry = { controller, done: Promise.resolve() };
    active.set(run.id, entry);
    const reason = () => (controller.signal.reason instanceof Abort ? controller.signal.reason.reason : undefined);
    const started = performance.now();
    const finish = async (outcome: Parameters<typeof deps.jobs.finish>[2]) => {
      await deps.jobs.finish(run.id, workerId, outcome);
      deps.metrics.runFinished(run.kind, outcome.state, (performance.now() - started) / 1000);
    };
    // An executor may return before it noticed a cancel (or ignore it): a stored request still
    // makes the run `canceled`, never `succeeded`.
    const settledReason = async () => {
      const why = reason();
      if (why) return why;
      const now = await deps.jobs.get(run.id).catch(() => undefined);
      return now?.cancelRequested ? ('cancel' as const) : undefined;
    };
    try {
      if (run.cancelRequested) controller.abort(new Abort('cancel'));
      const result = await executor({
        run,
        signal: controller.signal,
        deps,
        // Stamped now: a deferred event may be written a little later.
        emit: (e, o) => events.push({ ...e, at: deps.clock.now() }, o),
      });
      await events.idle();
      const why = await settledReason();
      if (why === 'cancel') await finish({ state: 'canceled', result });
      else if (why === 'shutdown') await finish({ state: 'interrupted', error: 'runner shut down', result });
      else if (why !== 'lease-lost') await finish({ state: 'succeeded', result });
    } catch (err) {
      // Whatever the executor emitted before it failed goes before the closing event.
      await events.idle();
      const why = await settledReason();
      const message = errorMessage(err);
      if (why === 'cancel') await finish({ state: 'canceled' });
      else if (why === 'shutdown') await finish({ state: 'interrupted', error: 'runner shut down' });
      else if (why !== 'lease-lost') await finish({ state: 'failed', error: message });
      if (!why) deps.log.warn('run failed', { run: run.id, kind: run.kind, error: message });
    } finally {
      clearInterval(beat);
      active.delete(run.id);
      wake?.();
    }
  }

  async function tick(): Promise<void> {
    // Cancels stored by another process's API reach this worker within one poll.
    for (const id of await deps.jobs.cancelRequestedAmong([...active.keys()])) {
      active.get(id)?.controller.abort(new Abort('cancel'));
    }
    if (performance.now() - reapedAt >= reapEveryMs) {
      reapedAt = performance.now();
      const reaped = await deps.jobs.reapExpired();
      if (reaped.length) await opts.onInterrupted?.(reaped);
    }
    while (!stopping && active.size < concurrency) {
      const run = await deps.jobs.claim({ workerId, leaseMs, kinds });
      if (!run) break;
      const entry = execute(run);
      const a = active.get(run.id);
      if (a) a.done = entry;
    }
  }

  async function run(): Promise<void> {
    while (!stopping) {
      try {
        await tick();
      } catch (err) {
        deps.log.error('worker tick failed', { error: errorMessage(err) });
      }
      if (stopping) break;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, pollMs);
        wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
  }

  return {
    start() {
      loop ??= run();
    },
    async stop(budgetMs) {
      // One budget for the whole stop: a run that only gets its grace after the wait (tofu's SIGINT
      // window) would otherwise double it, past the point where a supervisor sends SIGKILL.
      const deadline = performance.now() + budgetMs;
      stopping = true;
      wake?.();
      await loop;
      offWake();
      const all = () => Promise.all([...active.values()].map((a) => a.done));
      const finishMs = Math.max(0, deadline - budgetMs / 2 - performance.now());
      const timedOut = await Promise.race([all().then(() => false), sleep(finishMs).then(() => true)]);
      if (timedOut) {
        const left = Math.max(0, Math.round(deadline - performance.now()));
        for (const a of active.values()) a.controller.abort(new Abort('shutdown', left));
        await all();
      }
      offCancel();
    },
    get active() {
      return active.size;
    },
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref?.());
