import { eq } from 'drizzle-orm';
import { readFile, writeFile } from 'node:fs/promises';
import { provisionPlans } from '../../../db/schema/index.ts';
import type { Deps } from '../../../functions/context.ts';

const context = (runId: string) => `plan:${runId}`;

export async function savePlan(
  deps: Pick<Deps, 'db' | 'sealer' | 'clock'>,
  input: {
    runId: string;
    clusterId: string;
    planFile: string;
    stateVersion: number | null;
    destroy: boolean;
    summary: { add: number; change: number; destroy: number };
    resources: { address: string; action: string }[];
  },
): Promise<void> {
  const bytes = await readFile(input.planFile);
  await deps.db.insert(provisionPlans).values({
    runId: input.runId,
    clusterId: input.clusterId,
    planSealed: deps.sealer.seal(bytes, context(input.runId)),
    stateVersion: input.stateVersion,
    destroy: input.destroy,
    summary: input.summary,
    resources: input.resources,
    createdAt: deps.clock.now(),
  });
}

export async function findPlan(deps: Pick<Deps, 'db'>, runId: string) {
  return deps.db.select().from(provisionPlans).where(eq(provisionPlans.runId, runId)).get();
}

/** Writes the saved plan back to disk (0600) for `apply`. */
export async function restorePlan(deps: Pick<Deps, 'sealer'>, row: { runId: string; planSealed: string }, path: string): Promise<void> {
  await writeFile(path, deps.sealer.open(row.planSealed, context(row.runId)), { mode: 0o600 });
}
