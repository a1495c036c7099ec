import { dialOf } from '../../../functions/machine-config/access.ts';
import { and, eq, isNull } from 'drizzle-orm';
import { clusters, machines } from '../../../db/schema/index.ts';
import { RunError, type JobExecutor } from '../../../lib/jobs/executor.ts';
import type { BootstrapParams } from '../../../functions/push-config/job.ts';
import { isTalosApiError } from '../../../lib/talos/api/index.ts';
import type { Deps } from '../../../functions/context.ts';
import { clusterAccess } from '../cluster-access.ts';
import { talosFailure } from './failures.ts';
import { readyForBootstrap } from '../../../functions/push-config/machine-state.ts';
import { pause } from '../pause.ts';
import { pushTimings } from './timings.ts';


/**
 * Codes after which the Bootstrap request certainly did not start etcd, so asking again is
 * safe: the node is not ready yet (FailedPrecondition: "bootstrap is not available yet", "time
 * is not in sync yet") or no connection was made. A deadline or dropped connection is not
 * among them: the node may have acted on the request, and a second one is what upstream warns about.
 */
const NOT_SENT_OR_NOT_READY = new Set(['failed-precondition', 'unreachable']);

/** Bootstrap on one control plane, at most once per cluster; recorded only when the node accepted it. */
export const bootstrapExecutor: JobExecutor<Deps, BootstrapParams> = async ({ run, deps, emit, signal }, p) => {
  const t = pushTimings(deps);
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, run.clusterId!)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  if (cluster.bootstrappedAt !== null) throw new RunError('the cluster is already bootstrapped; a second bootstrap is not sent');
  const machine = await deps.db
    .select()
    .from(machines)
    .where(and(eq(machines.id, p.machine), eq(machines.clusterId, cluster.id)))
    .get();
  if (!machine) throw new RunError('machine no longer exists');
  if (machine.role !== 'controlplane') throw new RunError(`${machine.name} is not a control plane`);
  if (!readyForBootstrap(machine)) throw new RunError(`${machine.name} is ${machine.state}, not configured`);
  const address = await dialOf(deps, machine);
  if (!address) throw new RunError(`${machine.name} has no address to reach its Talos API`);

  const access = await clusterAccess(deps, cluster);
  const client = await access.talosClient(address);
  const call = { deadlineMs: t.callDeadlineMs, signal };
  const fail = async (stepName: string, err: unknown): Promise<never> => {
    if (signal.aborted) throw err;
    const failure = talosFailure(stepName, err, 'mtls', t.callDeadlineMs);
    if (failure instanceof RunError) await emit({ level: 'error', type: 'bootstrap.error', message: failure.message, data: failure.data });
    throw failure;
  };
  try {
    await emit({ type: 'bootstrap.connect', message: `connecting to ${machine.name} (${client.node}) over mTLS`, data: { machine: machine.id, node: client.node } });
    const version = await client.version(call).catch((err: unknown) => fail('preflight', err));
    await emit({ type: 'bootstrap.preflight', message: `node answered: Talos ${version.tag}`, data: { talosVersion: version.tag } });

    const end = Date.now() + t.readyTimeoutMs;
    for (let attempt = 1; ; attempt++) {
      await emit({ type: 'bootstrap.send', message: `sending Bootstrap (attempt ${attempt})` });
      try {
        await client.bootstrap(call);
        break;
      } catch (err) {
        if (signal.aborted) throw err;
        const retry = isTalosApiError(err) && NOT_SENT_OR_NOT_READY.has(err.code) && Date.now() + t.pollMs < end;
        if (!retry) {
          if (isTalosApiError(err, 'already-exists')) {
            await emit({ level: 'error', type: 'bootstrap.error', message: `bootstrap: ${err.message} (etcd on this node is already bootstrapped; nothing recorded)`, data: { node: err.node, code: err.code, grpcStatus: err.grpcStatus } });
            throw new RunError(`bootstrap: ${err.message} (etcd on this node is already bootstrapped; nothing recorded)`);
          }
          return await fail('bootstrap', err);
        }
        await emit({ level: 'warn', type: 'bootstrap.retry', message: `node not ready for bootstrap yet: ${(err as Error).message}` });
        await pause(t.pollMs, signal);
      }
    }
  } finally {
    client.close();
  }

  const now = deps.clock.now();
  const [marked] = await deps.db
    .update(clusters)
    .set({ bootstrappedAt: now, updatedAt: now })
    .where(and(eq(clusters.id, cluster.id), isNull(clusters.bootstrappedAt)))
    .returning({ id: clusters.id });
  if (!marked) throw new RunError('the node accepted the bootstrap, but the cluster was marked bootstrapped meanwhile');
  await emit({ type: 'bootstrap.done', message: `etcd bootstrapped on ${machine.name}`, data: { machine: machine.id, bootstrappedAt: now } });
  return { machine: machine.id, node: client.node, bootstrappedAt: now };
};
