// Writes a pass's results: samples, each machine's latest state, each cluster's rollup and the
// Talos version each node reported. One batch (one transaction) for the whole pass, so a reader
// never sees half a pass and the database commits once a pass, not once per cluster.
import { and, eq, inArray, sql } from 'drizzle-orm';
import type { DbStatement as Statement } from '../../../db/client.ts';
import { clusterHealth, healthSamples, machineHealth, machines } from '../../../db/schema/index.ts';
import type { Deps } from '../../../functions/context.ts';
import type { ClusterAssessment, HealthState, MachineAssessment, TalosCpuStat } from '../../../functions/collect/types.ts';

export interface MachineOutcome {
  assessment: MachineAssessment;
  /** Talos answered this pass. */
  reached: boolean;
  error: string | null;
  previousCpu: TalosCpuStat | null;
}

/** A machine the pass did not read (not configured yet, no address): its state says why. */
export interface SkippedMachine {
  id: string;
  reason: string;
}

export interface ClusterOutcome {
  clusterId: string;
  at: number;
  rollup: Pick<ClusterAssessment, 'state' | 'reasons' | 'kubernetesVersion' | 'talosVersions' | 'etcd'>;
  kubeError: string | null;
  machines: MachineOutcome[];
  skipped: SkippedMachine[];
}

const excluded = (column: string) => sql.raw(`excluded.${column}`);

function clusterStatements(deps: Pick<Deps, 'db'>, o: ClusterOutcome): Statement[] {
  const { db } = deps;
  // One JSON parameter for all the cluster's samples, unpacked by SQLite: building a multi-row
  // VALUES list of thousands of bound parameters cost more CPU than the rest of the pass's writes.
  const samples: [string, string, number][] = [];
  for (const m of o.machines) for (const s of m.assessment.samples) if (Number.isFinite(s.value)) samples.push([m.assessment.id, s.metric, s.value]);
  const sampleInserts = samples.length
    ? [
        db.run(sql`INSERT INTO ${healthSamples} (machine_id, metric, ts, value)
          SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), ${o.at}, json_extract(j.value, '$[2]') FROM json_each(${JSON.stringify(samples)}) AS j WHERE true
          ON CONFLICT (machine_id, metric, ts) DO UPDATE SET value = excluded.value`),
      ]
    : [];

  const healthRows = [
    ...o.machines.map((m) => ({
      machineId: m.assessment.id,
      clusterId: o.clusterId,
      state: m.assessment.state,
      reasons: m.assessment.reasons,
      checkedAt: o.at,
      lastSeenAt: m.reached ? o.at : null,
      talosVersion: m.assessment.talosVersion,
      kubernetesVersion: m.assessment.kubernetesVersion,
      lastError: m.error,
      latest: Object.fromEntries(m.assessment.samples.map((s) => [s.metric, s.value])),
      previousCpu: m.previousCpu as Record<string, number> | null,
    })),
    ...o.skipped.map((s) => ({
      machineId: s.id,
      clusterId: o.clusterId,
      state: 'unknown' as HealthState,
      reasons: [s.reason],
      checkedAt: o.at,
      lastSeenAt: null,
      talosVersion: null,
      kubernetesVersion: null,
      lastError: null,
      latest: {},
      previousCpu: null,
    })),
  ];
  const healthUpsert = healthRows.length
    ? [
        db
          .insert(machineHealth)
          .values(healthRows)
          .onConflictDoUpdate({
            target: machineHealth.machineId,
            set: {
              state: excluded('state'),
              reasons: excluded('reasons'),
              checkedAt: excluded('checked_at'),
              // An unreachable node keeps the time it was last seen, its versions and its CPU baseline.
              lastSeenAt: sql`coalesce(excluded.last_seen_at, ${machineHealth.lastSeenAt})`,
              talosVersion: sql`coalesce(excluded.talos_version, ${machineHealth.talosVersion})`,
              kubernetesVersion: sql`coalesce(excluded.kubernetes_version, ${machineHealth.kubernetesVersion})`,
              lastError: excluded('last_error'),
              latest: excluded('latest'),
              previousCpu: sql`coalesce(excluded.previous_cpu, ${machineHealth.previousCpu})`,
            },
          }),
      ]
    : [];

  const rollup = {
    clusterId: o.clusterId,
    state: o.rollup.state,
    reasons: o.rollup.reasons,
    checkedAt: o.at,
    kubernetesVersion: o.rollup.kubernetesVersion,
    talosVersions: o.rollup.talosVersions,
    etcd: o.rollup.etcd,
    kubeError: o.kubeError,
  };
  // One statement per cluster: the health upsert above just stored each reached node's version.
  const versioned = o.machines.filter((m) => m.assessment.talosVersion).map((m) => m.assessment.id);
  const reported = sql`(SELECT ${machineHealth.talosVersion} FROM ${machineHealth} WHERE ${machineHealth.machineId} = ${machines.id})`;
  const versionUpdate = versioned.length
    ? [db.update(machines).set({ talosVersion: reported }).where(and(inArray(machines.id, versioned), sql`${machines.talosVersion} IS NOT ${reported}`))]
    : [];

  return [
    db.insert(clusterHealth).values(rollup).onConflictDoUpdate({
      target: clusterHealth.clusterId,
      set: {
        state: rollup.state,
        reasons: rollup.reasons,
        checkedAt: rollup.checkedAt,
        kubernetesVersion: rollup.kubernetesVersion,
        talosVersions: rollup.talosVersions,
        etcd: rollup.etcd,
        kubeError: rollup.kubeError,
      },
    }),
    ...healthUpsert,
    ...sampleInserts,
    ...versionUpdate,
  ];
}

const runBatch = (deps: Pick<Deps, 'db'>, items: Statement[]) => deps.db.batch(items as [Statement, ...Statement[]]);

export async function storeClusterOutcome(deps: Pick<Deps, 'db'>, o: ClusterOutcome): Promise<void> {
  await runBatch(deps, clusterStatements(deps, o));
}

/**
 * Stores every cluster's outcome in one batch. If that fails (typically a machine deleted under
 * the pass), each cluster is stored on its own so only the clusters that cannot be stored are
 * lost; returns their ids with the error.
 */
export async function storePassOutcomes(deps: Pick<Deps, 'db'>, outcomes: ClusterOutcome[]): Promise<Map<string, unknown>> {
  const failed = new Map<string, unknown>();
  if (outcomes.length === 0) return failed;
  try {
    await runBatch(deps, outcomes.flatMap((o) => clusterStatements(deps, o)));
    return failed;
  } catch {
    for (const o of outcomes) {
      try {
        await storeClusterOutcome(deps, o);
      } catch (err) {
        failed.set(o.clusterId, err);
      }
    }
    return failed;
  }
}

export async function previousCpuOf(deps: Pick<Deps, 'db'>, machineIds: string[]): Promise<Map<string, TalosCpuStat>> {
  if (machineIds.length === 0) return new Map();
  const rows = await deps.db
    .select({ id: machineHealth.machineId, cpu: machineHealth.previousCpu })
    .from(machineHealth)
    .where(inArray(machineHealth.machineId, machineIds));
  return new Map(rows.filter((r) => r.cpu).map((r) => [r.id, r.cpu as unknown as TalosCpuStat]));
}

export const clusterHealthRow = (deps: Pick<Deps, 'db'>, clusterId: string) =>
  deps.db.select().from(clusterHealth).where(eq(clusterHealth.clusterId, clusterId)).get();
