// A whole bare-metal cluster pushed in one run: every machine goes through the single-machine
// push (same channel rules, same waits), concurrently up to a bound. One machine's failure is its
// own: the others carry on, and the run fails at the end naming the machines that did not make it.
import { setMaxListeners } from 'node:events';
import pLimit from 'p-limit';
import { eq } from 'drizzle-orm';
import { clusters, machines } from '../../../db/schema/index.ts';
import { RunError, type EmitOptions, type JobExecutor, type RunContext } from '../../../lib/jobs/executor.ts';
import type { RunEventInput } from '../../../lib/jobs/types.ts';
import type { PushClusterParams } from '../../../functions/push-config/job.ts';
import type { Deps } from '../../../functions/context.ts';
import { errorMessage } from '../../../lib/errors.ts';
import { loadClusterPushShared, pushMachine, type PushConfigResult } from './executor.ts';
import { bootstrapExecutor } from './bootstrap.ts';

export type MachinePushOutcome = { machine: string; name: string } & ({ ok: true; result: PushConfigResult } | { ok: false; error: string });

export interface PushClusterResult {
  configured: string[];
  failed: Array<{ name: string; error: string }>;
  bootstrapped: string | null;
  outcomes: MachinePushOutcome[];
}

/** The run's context as one machine's push sees it: its events carry the machine and its name. */
function forMachine(ctx: RunContext<Deps>, id: string, name: string): RunContext<Deps> {
  return {
    ...ctx,
    emit: (e: RunEventInput, opts?: EmitOptions) => ctx.emit({ ...e, message: `${name}: ${e.message}`, data: { ...(e.data ?? {}), machine: id, name } }, opts),
  };
}

export const pushClusterExecutor: JobExecutor<Deps, PushClusterParams> = async (ctx, p) => {
  const { run, deps, emit, signal } = ctx;
  // Every concurrent push's Talos calls listen on the run's signal.
  setMaxListeners(0, signal);
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, run.clusterId!)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  const rows = new Map((await deps.db.select().from(machines).where(eq(machines.clusterId, cluster.id))).map((m) => [m.id, m]));
  const names = new Map(p.machines.map((m) => [m.id, rows.get(m.id)?.name ?? m.id]));
  await emit({
    type: 'push.plan',
    message: `pushing ${p.machines.length} machines, up to ${p.concurrency} at a time${p.bootstrap ? `; bootstrapping ${names.get(p.bootstrap)} once it is configured` : ''}`,
    data: { machines: [...names.values()], concurrency: p.concurrency },
  });

  const shared = await loadClusterPushShared(deps, cluster, rows);
  let bootstrapped: string | null = null;
  let bootstrapError: string | null = null;
  const limit = pLimit(p.concurrency);
  const outcomes = await Promise.all(
    p.machines.map((m) =>
      limit(async (): Promise<MachinePushOutcome> => {
        const name = names.get(m.id)!;
        if (signal.aborted) return { machine: m.id, name, ok: false, error: 'not pushed: the run was stopped' };
        const mctx = forMachine(ctx, m.id, name);
        try {
          const params = { machine: m.id, insecure: m.insecure, mode: 'auto' as const, dryRun: false, ...(m.certFingerprint ? { certFingerprint: m.certFingerprint } : {}) };
          const result = await pushMachine(mctx, params, shared);
          if (p.bootstrap === m.id) {
            try {
              await bootstrapExecutor(mctx, { machine: m.id });
              bootstrapped = name;
            } catch (err) {
              bootstrapError = errorMessage(err);
            }
          }
          return { machine: m.id, name, ok: true, result };
        } catch (err) {
          const error = errorMessage(err);
          if (!signal.aborted) await mctx.emit({ level: 'error', type: 'push.machine.failed', message: error, data: { error } });
          return { machine: m.id, name, ok: false, error };
        }
      }),
    ),
  );
  signal.throwIfAborted();

  const result: PushClusterResult = {
    configured: outcomes.filter((o) => o.ok).map((o) => o.name),
    failed: outcomes.flatMap((o) => (o.ok ? [] : [{ name: o.name, error: o.error }])),
    bootstrapped,
    outcomes,
  };
  await emit({
    level: result.failed.length ? 'error' : 'info',
    type: 'push.summary',
    message: `${result.configured.length} configured, ${result.failed.length} failed${result.failed.length ? `: ${result.failed.map((f) => f.name).join(', ')}` : ''}`,
    data: { configured: result.configured, failed: result.failed, bootstrapped },
  });
  const problems = result.failed.map((f) => `${f.name}: ${f.error}`);
  if (p.bootstrap && !bootstrapped) problems.push(`bootstrap of ${names.get(p.bootstrap)}: ${bootstrapError ?? 'not attempted, its push failed'}`);
  if (problems.length) throw new RunError(`push failed for ${problems.join('; ')}`, { failed: result.failed.map((f) => f.name), configured: result.configured });
  return result;
};
