import { and, eq } from 'drizzle-orm';
import { machines } from '../../../db/schema/index.ts';
import type { Deps } from '../../../functions/context.ts';
import type { MachineRow } from '../../../functions/inventory/load.ts';
import type { TalosDialer } from '../../../functions/machine-config/access.ts';
import { RunError } from '../../../lib/jobs/executor.ts';

/** The cluster's control planes that have a Talos API address, by name: the etcd members a run can reach. */
export async function reachableControlPlanes(deps: Pick<Deps, 'db'>, clusterId: string, dial: TalosDialer): Promise<MachineRow[]> {
  const cps = (await deps.db.select().from(machines).where(and(eq(machines.clusterId, clusterId), eq(machines.role, 'controlplane'))))
    .filter((m) => dial(m))
    .sort((a, b) => a.name.localeCompare(b.name));
  if (cps.length === 0) throw new RunError('the cluster has no control plane with an address');
  return cps;
}
