// Re-pushes mesh nodes whose config dials a hub endpoint that is no longer current. Each node is
// reached over the mesh (its overlay address, mTLS with the cluster's admin certificate) and gets
// its full generated config in no-reboot mode: a WireguardConfig change is applied live, and an
// automatic run must never reboot a node. A node that needs a reboot for other pending changes
// fails here, named, and is left to an explicit push.
import { talosDialer } from '../../../functions/machine-config/access.ts';
import pLimit from 'p-limit';
import { setMaxListeners } from 'node:events';
import { eq } from 'drizzle-orm';
import { clusters, machines } from '../../../db/schema/index.ts';
import { RunError, type JobExecutor } from '../../../lib/jobs/executor.ts';
import type { Deps } from '../../../functions/context.ts';
import type { MeshRepushParams } from '../../../functions/mesh/job.ts';
import { renderOrReject } from '../../../functions/machine-config/render.ts';
import { errorMessage } from '../../../lib/errors.ts';
import { meshDelivery } from '../../../lib/mesh/dial.ts';
import { affectedMachines, markDelivered } from '../../../lib/mesh/store.ts';
import { clusterAccess } from '../cluster-access.ts';
import { waitForMtls } from '../push-config/node-wait.ts';
import { pushTimings } from '../push-config/timings.ts';

const CONCURRENCY = 4;
/** After the apply the node re-handshakes towards the new endpoint; this bounds how long we wait to hear it again. */
const BACK_ON_MESH_MS = 120_000;

export interface MeshRepushResult {
  reason: string;
  repushed: string[];
  failed: { name: string; error: string }[];
}

export const meshRepushExecutor: JobExecutor<Deps, MeshRepushParams> = async ({ run, deps, emit, signal }, p) => {
  setMaxListeners(0, signal);
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, run.clusterId!)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  const affected = await affectedMachines(deps.db, cluster.id);
  const rows = await deps.db.select().from(machines).where(eq(machines.clusterId, cluster.id));
  const byId = new Map(rows.map((m) => [m.id, m]));
  const targets = affected.filter((a) => byId.has(a.machineId));
  if (targets.length === 0) {
    await emit({ type: 'mesh.repush.none', message: `${p.reason}; no node holds a config with another endpoint, nothing to push` });
    return { reason: p.reason, repushed: [], failed: [] } satisfies MeshRepushResult;
  }
  const names = targets.map((a) => byId.get(a.machineId)!.name);
  await emit({
    type: 'mesh.repush.plan',
    message: `${p.reason}: re-pushing ${targets.length} node(s) over the mesh: ${names.join(', ')}`,
    data: { reason: p.reason, machines: targets.map((a) => ({ machine: a.machineId, name: byId.get(a.machineId)!.name, from: a.delivered, to: a.wanted })) },
  });

  const t = pushTimings(deps);
  const wait = { ...t, readyTimeoutMs: Math.min(t.readyTimeoutMs, BACK_ON_MESH_MS) };
  const access = await clusterAccess(deps, cluster);
  const dial = await talosDialer(deps, cluster.id);
  const limit = pLimit(CONCURRENCY);
  const result: MeshRepushResult = { reason: p.reason, repushed: [], failed: [] };

  await Promise.all(
    targets.map((a) =>
      limit(async () => {
        const m = byId.get(a.machineId)!;
        if (signal.aborted) return;
        const address = dial(m);
        try {
          if (!address) throw new Error('no address to reach its Talos API');
          const delivery = await meshDelivery(deps, m.id);
          const data = Buffer.from(renderOrReject(cluster, m, access.secrets, 'patches', delivery.documents));
          const client = await access.talosClient(address);
          try {
            const applied = await client.applyConfiguration({ data, mode: 'no-reboot' }, { deadlineMs: t.callDeadlineMs, signal });
            // The node holds the new endpoint from here, whether or not we hear it again below.
            await markDelivered(deps.db, m.id, delivery.endpoint);
            await emit({
              type: 'mesh.repush.applied',
              message: `${m.name}: config applied without reboot at ${address}; its WireGuard now dials ${delivery.endpoint ?? 'nothing'} (was ${a.delivered})${applied.warnings.length ? `, ${applied.warnings.length} warning(s)` : ''}`,
              data: { machine: m.id, name: m.name, from: a.delivered, to: delivery.endpoint, mode: applied.mode },
            });
          } finally {
            client.close();
          }
          const back = await waitForMtls(access, address, wait, signal);
          await emit({ type: 'mesh.repush.node', message: `${m.name}: answers over the mesh again (Talos ${back.tag})`, data: { machine: m.id, name: m.name } });
          result.repushed.push(m.name);
        } catch (err) {
          if (signal.aborted) return;
          const error = errorMessage(err);
          result.failed.push({ name: m.name, error });
          await emit({ level: 'error', type: 'mesh.repush.failed', message: `${m.name}: ${error}`, data: { machine: m.id, name: m.name, error } });
        }
      }),
    ),
  );
  signal.throwIfAborted();
  result.repushed.sort();
  await emit({
    level: result.failed.length ? 'error' : 'info',
    type: 'mesh.repush.summary',
    message: `${result.repushed.length} re-pushed, ${result.failed.length} failed${result.failed.length ? `: ${result.failed.map((f) => f.name).join(', ')}` : ''}`,
    data: { ...result },
  });
  if (result.failed.length) throw new RunError(`re-push failed for ${result.failed.map((f) => `${f.name}: ${f.error}`).join('; ')}`, { failed: result.failed.map((f) => f.name) });
  return result;
};
