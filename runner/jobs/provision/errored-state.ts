import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Deps } from '../../../functions/context.ts';
import { keepRecoverableVersion, lockHolder, parseStateDocument, StateWriteRefused, writeState } from '../../../functions/state/store.ts';

/** The file tofu writes into its work dir when it could not upload the state it just changed. */
export const ERRORED_STATE_FILE = 'errored.tfstate';

/**
 * Stores an `errored.tfstate` tofu left behind as a new state version (a hidden, recoverable one
 * when lineage or serial forbid it becoming current) and deletes the file: it is the only record
 * of what tofu created, and it is plaintext. Answers the stored version, or undefined if none.
 */
export async function storeErroredState(
  deps: Deps,
  input: { workDir: string; runId: string; tenantId: string; clusterId: string },
): Promise<{ version: number; recoverable: boolean } | undefined> {
  const file = join(input.workDir, ERRORED_STATE_FILE);
  let body: Buffer;
  try {
    body = await readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const parsed = parseStateDocument(body);
  if (!parsed) {
    await rm(file, { force: true });
    return undefined;
  }
  const holder = await lockHolder(deps, input.clusterId);
  // Written under this run's own lock if tofu left it held; otherwise as an unlocked write.
  const lockId = holder?.heldBy === input.runId ? holder.lockId : undefined;
  let stored: { version: number; recoverable: boolean };
  try {
    const res = await writeState(deps, {
      tenantId: input.tenantId,
      clusterId: input.clusterId,
      body,
      parsed,
      lockId,
      writtenBy: input.runId,
      keepVersions: deps.settings.stateKeepVersions,
    });
    stored = { version: res.version, recoverable: false };
  } catch (err) {
    if (!(err instanceof StateWriteRefused)) throw err;
    const kept = await keepRecoverableVersion(deps, { tenantId: input.tenantId, clusterId: input.clusterId, body, parsed, runId: input.runId });
    stored = { version: kept.version, recoverable: true };
  }
  await rm(file, { force: true });
  return stored;
}
