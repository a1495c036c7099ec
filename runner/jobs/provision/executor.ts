import { and, eq, ne } from 'drizzle-orm';
import { join } from 'node:path';
import { clusters, machines } from '../../../db/schema/index.ts';
import { withClusterDefaults } from '../../../lib/cloud/cluster-defaults.ts';
import { RunError, type JobExecutor } from '../../../lib/jobs/executor.ts';
import { errorMessage } from '../../../lib/errors.ts';
import type { RunEventInput } from '../../../lib/jobs/types.ts';
import type { ProvisionParams } from '../../../functions/provision/job.ts';
import { machineAddressesFrom, resolveTofuBinary, TofuCommandError, TofuWorkspace, type RunEvent, type RunFiles, type TofuOutput } from '../../../lib/tofu/index.ts';
import type { Deps } from '../../../functions/context.ts';
import { openClusterSecrets } from '../../../functions/machine-config/secrets.ts';
import { loadProviderEnv, type CredentialProvider } from '../../../functions/providers/credentials.ts';
import { currentVersion } from '../../../functions/state/store.ts';
import { mintStateCredential, revokeStateCredential } from '../../../functions/state/credentials.ts';
import { configRenderer } from './rendered-configs.ts';
import { clusterMeshDeliveries } from '../../../lib/mesh/dial.ts';
import { deliveredUpdate } from '../../../lib/mesh/store.ts';
import { findPlan, restorePlan, savePlan } from './plans.ts';
import { storeErroredState } from './errored-state.ts';
import { CLOUD_PROVIDERS, writeRootModule, type CloudProvider, type ProviderSettings } from './root-module.ts';


const STATE_CREDENTIAL_TTL_MS = 6 * 60 * 60 * 1000;

/** Waits for every task, then fails with the first failure, if any. */
async function allOf(tasks: (Promise<unknown> | undefined)[]): Promise<void> {
  const failed = (await Promise.allSettled(tasks)).find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/**
 * plan → (saved, sealed, waits for approval) or plan → apply in one run; an approval run applies
 * exactly the saved plan. The state lives in RezusCloud's own http backend under a credential
 * minted for this run alone.
 */
export const provisionExecutor: JobExecutor<Deps, ProvisionParams> = async ({ run, deps, emit, signal }, params) => {
  const cluster = await deps.db.select().from(clusters).where(eq(clusters.id, run.clusterId!)).get();
  if (!cluster) throw new RunError('cluster no longer exists');
  const cloudMachines = await deps.db
    .select()
    .from(machines)
    .where(and(eq(machines.clusterId, cluster.id), ne(machines.provider, 'metal')))
    .orderBy(machines.name);
  const providers = [...new Set(cloudMachines.map((m) => m.provider as CloudProvider))].filter((p) => CLOUD_PROVIDERS.includes(p)).sort();
  if (providers.length === 0) throw new RunError('the cluster has no cloud machines to provision (metal machines get their config by push-config)');

  // Each machine's Talos config becomes its user_data; rendering is deterministic, so an
  // unchanged machine plans as no change. It runs while tofu initialises (init needs no
  // variables), yielding between machines so that init's own steps get their turns.
  const render = configRenderer(cluster, openClusterSecrets(deps, cluster));
  // Mesh nodes carry their WireguardConfig in user_data (lib/mesh/dial.ts).
  const mesh = await clusterMeshDeliveries(deps, cluster.id);
  const renderVars = async (): Promise<Record<string, unknown>> => {
    const vars: Record<string, unknown> = { cluster_name: cluster.name };
    for (const p of providers) {
      const configs: Record<string, { role: string; user_data: string }> = {};
      for (const m of cloudMachines.filter((x) => x.provider === p)) {
        await new Promise((resolve) => setImmediate(resolve));
        configs[m.name] = { role: m.role, user_data: render(m, mesh.get(m.id)?.documents ?? []) };
      }
      vars[`machines_${p}`] = configs;
    }
    return vars;
  };

  const { bin: tofuBin, pathEnv, selfUrl } = deps.settings.tofu;
  const binary = await resolveTofuBinary({ env: { PATH: pathEnv, ...(tofuBin ? { REZUS_TOFU_BIN: tofuBin } : {}) } });
  const credentialProviders = providers.filter((p): p is CredentialProvider => p !== 'local');
  const providerEnv = await loadProviderEnv(deps, cluster.tenantId, credentialProviders).catch((err: Error) => {
    throw new RunError(err.message);
  });
  const cred = await mintStateCredential(deps, { runId: run.id, tenantId: cluster.tenantId, clusterId: cluster.id, ttlMs: STATE_CREDENTIAL_TTL_MS });
  const rootDir = join(deps.settings.dataDir, 'roots', cluster.tenantId, cluster.id);
  const settings = (cluster.settings as { providerSettings?: ProviderSettings }).providerSettings ?? {};
  const ws = new TofuWorkspace({
    binary: binary.path,
    dataDir: deps.settings.dataDir,
    tenantId: cluster.tenantId,
    clusterId: cluster.id,
    moduleDir: rootDir,
    backend: { kind: 'http', address: `${selfUrl}/v1/state/${cluster.tenantId}/${cluster.id}`, username: cred.username, password: cred.password },
    pathEnv,
    env: providerEnv,
    graceMs: deps.settings.tofu.cancelGraceMs,
    // A lock held elsewhere (a run on another runner, a force-unlock pending) is waited for briefly.
    lockTimeout: deps.settings.tofu.lockTimeout,
    runId: run.id,
  });

  // tofu's lines are written without blocking its stdout, deferred so that a burst costs one
  // commit. The run's own milestones go the same way: nothing here needs them stored before it
  // goes on. The worker stores events in the order they were emitted and writes what is left
  // before the run's closing event.
  const note = (e: RunEventInput) => {
    emit(e, { defer: true }).catch(() => undefined);
  };
  const onEvent = (e: RunEvent) => note(e);
  const hooks = { signal, onEvent };
  let files: RunFiles | undefined;
  try {
    await writeRootModule(rootDir, providers, withClusterDefaults(settings, cluster));
    note({ type: 'provision.init', message: `tofu init (${binary.flavor} ${binary.version})`, data: { providers } });
    const stopInit = new AbortController();
    const initRun = ws.init({ ...hooks, signal: AbortSignal.any([signal, stopInit.signal]) });
    initRun.catch(() => undefined); // awaited below; this only keeps an early failure from counting as unhandled
    try {
      files = await ws.createRunFiles(await renderVars());
    } catch (err) {
      // A config that does not render ends the run; its init is stopped and waited for first.
      stopInit.abort();
      await initRun.catch(() => undefined);
      throw err;
    }
    if (!(await initRun)) note({ type: 'provision.init_reused', message: 'work dir already initialised for these modules and this backend: init skipped' });
    const varFile = files.varFile;
    const planFile = files.planFile;

    if (params.planRun) return await applySaved(params.planRun, planFile);

    if (params.mode === 'apply') {
      const applied = await ws.applyVars({ ...hooks, varFile, destroy: params.destroy });
      const s = applied.summary;
      const changed = s.add + s.change + s.destroy > 0;
      if (!changed) note({ type: 'provision.nochange', message: 'infrastructure is up to date' });
      return { mode: 'apply', destroy: params.destroy, summary: s, resources: applied.resources, applied: changed, machines: await recordAddresses(applied.outputs) };
    }

    const before = await currentVersion(deps, cluster.id);
    const plan = await ws.plan({ ...hooks, varFile, destroy: params.destroy, outFile: planFile });
    const summary = plan.summary;
    await emit({ type: 'provision.planned', message: `plan: ${summary.add} to add, ${summary.change} to change, ${summary.destroy} to destroy`, data: { ...summary, resources: plan.resources } });
    await savePlan(deps, { runId: run.id, clusterId: cluster.id, planFile, stateVersion: before?.version ?? null, destroy: params.destroy, summary, resources: plan.resources });
    await emit({ type: 'provision.awaiting_approval', message: plan.hasChanges ? `approve with POST /v1/runs/${run.id}/approve` : 'no changes' });
    return { mode: 'plan', destroy: params.destroy, summary, resources: plan.resources, hasChanges: plan.hasChanges };
  } catch (err) {
    if (err instanceof TofuCommandError) {
      // The message already carries the first diagnostic.
      const why = err.diagnostics.length > 1 ? `; ${err.diagnostics.slice(1).join('; ')}` : '';
      throw new RunError(`${err.message}${why}`);
    }
    throw err;
  } finally {
    // tofu has exited here: whatever it could not upload is stored before its directory goes. If
    // that fails too (the database), the directory keeps errored.tfstate for the next start, which
    // stores it before it removes the directory (clearRunFiles).
    const stored = await keepErroredState({ tenantId: cluster.tenantId, clusterId: cluster.id }).then(
      () => true,
      (err: unknown) => {
        deps.log.error('errored.tfstate not stored; the run directory keeps it', { run: run.id, error: errorMessage(err) });
        return false;
      },
    );
    // Files and credential are independent: removed side by side, and one failing does not keep the others.
    await allOf([files?.dispose(), stored ? ws.disposeRun() : undefined, revokeStateCredential(deps, run.id)]);
  }

  async function keepErroredState(ids: { tenantId: string; clusterId: string }): Promise<void> {
    const errored = await storeErroredState(deps, { workDir: ws.dir, runId: run.id, ...ids });
    if (!errored) return;
    await emit({
      level: 'warn',
      type: 'provision.errored_state',
      message: `tofu could not upload its state; stored it as version ${errored.version}${errored.recoverable ? ' (hidden, for recovery)' : ''}`,
      data: errored,
    });
  }

  async function applySaved(planRunId: string, planFile: string) {
    const saved = await findPlan(deps, planRunId);
    if (!saved) throw new RunError(`plan ${planRunId} not found`);
    // The approval handler marked the plan as taken by this run; anything else is a bug.
    if (saved.appliedBy !== run.id) throw new RunError(`plan ${planRunId} belongs to run ${saved.appliedBy ?? 'none'}`);
    await restorePlan(deps, saved, planFile);
    await emit({ type: 'provision.apply_saved', message: `applying the plan of run ${planRunId}`, data: { ...saved.summary } });
    const applied = await ws.apply(planFile, hooks);
    return { mode: 'apply', destroy: saved.destroy, planRun: planRunId, summary: applied.summary, applied: true, machines: await recordAddresses(applied.outputs) };
  }

  /** Outputs give each machine its addresses; a destroyed machine loses them. */
  async function recordAddresses(streamed: Record<string, TofuOutput>) {
    const addrs = machineAddressesFrom(streamed.machines ? streamed : await ws.outputs({ signal }));
    const now = deps.clock.now();
    // One transaction for all machines: one commit instead of one per machine.
    const updates = cloudMachines.flatMap((m) => {
      const a = addrs[m.name];
      const row = deps.db
        .update(machines)
        .set({ ipv4: a?.ipv4 ?? null, ipv6: a?.ipv6 ?? null, state: a ? 'provisioned' : 'new', updatedAt: now })
        .where(eq(machines.id, m.id));
      // The endpoint its user_data dials, so a later hub endpoint change knows to re-push it.
      return mesh.has(m.id) ? [row, deliveredUpdate(deps.db, m.id, a ? (mesh.get(m.id)!.endpoint ?? null) : null)] : [row];
    });
    const [first, ...rest] = updates;
    if (first) await deps.db.batch([first, ...rest]);
    note({ type: 'provision.addresses', message: `${Object.keys(addrs).length} machine(s) with addresses`, data: { machines: addrs } });
    return addrs;
  }
};
