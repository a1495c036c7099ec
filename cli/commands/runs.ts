import { Option, type Command } from 'commander';
import { INVENTORY_POLICIES, type Run, type RunEvent } from '../api-types.ts';
import type { ApiClient } from '../client.ts';
import { usageError } from '../exit.ts';
import { exitCodeOf, followRun, formatEvent, readRest } from '../follow.ts';
import { printData, type OutputFormat } from '../output.ts';
import { resolveCluster, resolveMachine } from '../resolve.ts';
import { session } from '../session.ts';
import { finishRun, waitForRun } from '../wait.ts';

interface WaitOption {
  wait?: boolean;
}

/** POSTs something that answers `202 {run}`; with --wait follows it to its end. */
export async function submitRun(api: ApiClient, format: OutputFormat, path: string, body: unknown, opts: WaitOption): Promise<Run> {
  const { run } = await api.json<{ run: Run }>('POST', path, { body });
  if (!opts.wait) {
    if (format === 'table') console.log(`run ${run.id} (${run.kind}) ${run.state}; follow it with: rezus logs -f ${run.id}`);
    else printData(format, run);
    return run;
  }
  if (format === 'table') console.log(`run ${run.id} (${run.kind}) ${run.state}`);
  const done = await waitForRun(api, run.id, format);
  finishRun(done, format);
  if (done.state === 'succeeded' && done.kind === 'provision' && done.params?.mode === 'plan' && done.result?.hasChanges && format === 'table') {
    console.log(`apply exactly this plan with: rezus approve ${done.id} --wait`);
  }
  return done;
}

const waitOpt = (cmd: Command) => cmd.option('-w, --wait', 'follow the run to its end; exit 0 only if it succeeded');

export function registerRunCommands(program: Command): void {
  waitOpt(
    program
      .command('plan')
      .description('tofu plan of the cluster\'s cloud machines; the saved plan is applied with `rezus approve`')
      .argument('<cluster>', 'cluster name or id')
      .option('--destroy', 'plan the destruction of every resource'),
  ).action(async (ref: string, opts: WaitOption & { destroy?: boolean }, cmd: Command) => {
    const { api, format, opts: g } = await session(cmd);
    const cluster = await resolveCluster(api, ref, g.tenant);
    await submitRun(api, format, `/v1/clusters/${cluster.id}/provision`, { mode: 'plan', ...(opts.destroy ? { destroy: true } : {}) }, opts);
  });

  waitOpt(
    program
      .command('approve')
      .description('apply exactly the plan a plan run saved (refused if the state moved since)')
      .argument('<run>', 'the plan run id'),
  ).action(async (runId: string, opts: WaitOption, cmd: Command) => {
    const { api, format } = await session(cmd);
    await submitRun(api, format, `/v1/runs/${runId}/approve`, undefined, opts);
  });

  waitOpt(
    program
      .command('destroy')
      .description('destroy every cloud resource of the cluster (tofu destroy); its machines stay in the inventory')
      .argument('<cluster>', 'cluster name or id')
      .option('--yes', 'really destroy'),
  ).action(async (ref: string, opts: WaitOption & { yes?: boolean }, cmd: Command) => {
    if (!opts.yes) throw usageError('destroy deletes the cluster\'s cloud machines: add --yes (or review first with `rezus plan --destroy`)');
    const { api, format, opts: g } = await session(cmd);
    const cluster = await resolveCluster(api, ref, g.tenant);
    await submitRun(api, format, `/v1/clusters/${cluster.id}/provision`, { mode: 'apply', destroy: true }, opts);
  });

  waitOpt(
    program
      .command('push')
      .description('push a metal machine\'s generated config to its Talos API (port 50000)')
      .argument('<cluster>', 'cluster name or id')
      .argument('<machine>', 'machine name or id')
      .option('--insecure', 'the node is in maintenance mode: TLS without a client certificate')
      .option('--fingerprint <fp>', 'pin the maintenance-mode certificate (as the node console prints it)')
      .option('--mode <mode>', 'auto, reboot, no-reboot, staged or try')
      .option('--dry-run', 'let the node check the config without applying it'),
  ).action(async (ref: string, machineRef: string, opts: WaitOption & { insecure?: boolean; fingerprint?: string; mode?: string; dryRun?: boolean }, cmd: Command) => {
    const { api, format, opts: g } = await session(cmd);
    const cluster = await resolveCluster(api, ref, g.tenant);
    const machine = await resolveMachine(api, cluster, machineRef);
    const body = {
      ...(opts.insecure ? { insecure: true } : {}),
      ...(opts.fingerprint ? { certFingerprint: opts.fingerprint } : {}),
      ...(opts.mode ? { mode: opts.mode } : {}),
      ...(opts.dryRun ? { dryRun: true } : {}),
    };
    await submitRun(api, format, `/v1/clusters/${cluster.id}/machines/${machine.id}/push-config`, body, opts);
  });

  waitOpt(
    program
      .command('bootstrap')
      .description('bootstrap etcd once, on the first configured control plane (or the one named)')
      .argument('<cluster>', 'cluster name or id')
      .option('--machine <machine>', 'the control plane to bootstrap on'),
  ).action(async (ref: string, opts: WaitOption & { machine?: string }, cmd: Command) => {
    const { api, format, opts: g } = await session(cmd);
    const cluster = await resolveCluster(api, ref, g.tenant);
    await submitRun(api, format, `/v1/clusters/${cluster.id}/bootstrap`, opts.machine ? { machine: opts.machine } : {}, opts);
  });

  waitOpt(
    program
      .command('upgrade')
      .description('rolling Talos upgrade: control planes first, gated on etcd and node health')
      .argument('<cluster>', 'cluster name or id')
      .requiredOption('--to <version>', 'the Talos version, e.g. v1.13.10')
      .option('--image <image>', 'installer image (default: the cluster\'s schematic at that version)')
      .option('--batch-size <n>', 'workers upgraded at once', (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw usageError('--batch-size: a whole number of at least 1');
        return n;
      })
      .option('--stage', 'stage the upgrade, applied at the next reboot')
      .option('--force', 'allow a minor-version downgrade')
      .option('--preserve', 'keep ephemeral data'),
  ).action(async (ref: string, opts: WaitOption & { to: string; image?: string; batchSize?: number; stage?: boolean; force?: boolean; preserve?: boolean }, cmd: Command) => {
    const { api, format, opts: g } = await session(cmd);
    const cluster = await resolveCluster(api, ref, g.tenant);
    const body = {
      talosVersion: opts.to,
      ...(opts.image ? { image: opts.image } : {}),
      ...(opts.batchSize ? { batchSize: opts.batchSize } : {}),
      ...(opts.stage ? { stage: true } : {}),
      ...(opts.force ? { force: true } : {}),
      ...(opts.preserve ? { preserve: true } : {}),
    };
    await submitRun(api, format, `/v1/clusters/${cluster.id}/upgrade`, body, opts);
  });

  waitOpt(
    program
      .command('upgrade-kubernetes')
      .description('Kubernetes upgrade: static pods across the control planes, kube-proxy, each kubelet, then the bootstrap manifests')
      .argument('<cluster>', 'cluster name or id')
      .requiredOption('--to <version>', 'the Kubernetes version, e.g. 1.37.0 (at most one minor up)')
      .option('--include-pending-config', 'also push config changes the nodes do not run yet (otherwise the run stops on them)')
      .option('--no-manifests', 'skip the closing bootstrap-manifest sync')
      .option('--no-prune-manifests', 'let that sync keep what no manifest names any more')
      .option('--recreate-manifests', 'let that sync delete and create again objects whose immutable fields changed')
      .addOption(new Option('--manifests-inventory-policy <policy>', "which existing objects that sync may take over and prune").choices(INVENTORY_POLICIES)),
  ).action(async (ref: string, opts: WaitOption & { to: string; includePendingConfig?: boolean; manifests: boolean; pruneManifests: boolean; recreateManifests?: boolean; manifestsInventoryPolicy?: string }, cmd: Command) => {
    const { api, format, opts: g } = await session(cmd);
    const cluster = await resolveCluster(api, ref, g.tenant);
    const body = {
      version: opts.to,
      ...(opts.includePendingConfig ? { includePendingConfig: true } : {}),
      ...(opts.manifests ? {} : { manifests: false }),
      ...(opts.pruneManifests ? {} : { pruneManifests: false }),
      ...(opts.recreateManifests ? { recreateManifests: true } : {}),
      ...(opts.manifestsInventoryPolicy ? { manifestsInventoryPolicy: opts.manifestsInventoryPolicy } : {}),
    };
    await submitRun(api, format, `/v1/clusters/${cluster.id}/upgrade-kubernetes`, body, opts);
  });

  waitOpt(
    program
      .command('sync-manifests')
      .description("apply the bootstrap manifests the control planes render (server-side apply, prune, wait until ready)")
      .argument('<cluster>', 'cluster name or id')
      .option('--dry-run', 'report what would be created, configured and deleted; change nothing')
      .option('--no-prune', 'keep objects no manifest names any more')
      .option('--recreate', 'delete and create again objects whose immutable fields changed (talosctl --manifests-force)')
      .addOption(new Option('--inventory-policy <policy>', 'which existing objects the sync may take over and prune').choices(INVENTORY_POLICIES)),
  ).action(async (ref: string, opts: WaitOption & { dryRun?: boolean; prune: boolean; recreate?: boolean; inventoryPolicy?: string }, cmd: Command) => {
    const { api, format, opts: g } = await session(cmd);
    const cluster = await resolveCluster(api, ref, g.tenant);
    const body = {
      ...(opts.dryRun ? { dryRun: true } : {}),
      ...(opts.prune ? {} : { prune: false }),
      ...(opts.recreate ? { recreate: true } : {}),
      ...(opts.inventoryPolicy ? { inventoryPolicy: opts.inventoryPolicy } : {}),
    };
    await submitRun(api, format, `/v1/clusters/${cluster.id}/sync-manifests`, body, opts);
  });

  waitOpt(
    program
      .command('collect')
      .description('run a health collect pass now (every cluster the token sees, or one)')
      .argument('[cluster]', 'cluster name or id'),
  ).action(async (ref: string | undefined, opts: WaitOption, cmd: Command) => {
    const { api, format, opts: g } = await session(cmd);
    const cluster = ref ? await resolveCluster(api, ref, g.tenant) : undefined;
    await submitRun(api, format, '/v1/collect', cluster ? { cluster: cluster.id } : {}, opts);
  });

  waitOpt(program.command('backup').description('admin: a consistent copy of the embedded database under <data>/backups/')).action(
    async (opts: WaitOption, cmd: Command) => {
      const { api, format } = await session(cmd);
      await submitRun(api, format, '/v1/backups', undefined, opts);
    },
  );

  program
    .command('cancel')
    .description('cancel a run: a queued one ends at once, a running one is stopped by its worker')
    .argument('<run>', 'run id')
    .action(async (runId: string, _opts: unknown, cmd: Command) => {
      const { api, format } = await session(cmd);
      const run = await api.json<Run>('POST', `/v1/runs/${runId}/cancel`);
      if (format === 'table') console.log(`run ${run.id}: cancel requested (${run.state})`);
      else printData(format, run);
    });

  program
    .command('logs')
    .description('print a run\'s log; with -f follow it live until the run ends (exit code as for --wait)')
    .argument('<run>', 'run id')
    .option('-f, --follow', 'stream new events until the run ends')
    .action(async (runId: string, opts: { follow?: boolean }, cmd: Command) => {
      const { api, format } = await session(cmd);
      const print = (e: RunEvent) => (format === 'table' ? console.log(formatEvent(e)) : console.log(JSON.stringify(e)));
      if (opts.follow) {
        const run = await followRun(api, runId, print);
        if (format === 'table') console.log(`run ${run.id} ${run.state}${run.error ? `: ${run.error}` : ''}`);
        process.exitCode = exitCodeOf(run);
        return;
      }
      // Every page: a long run's log is longer than one answer.
      await readRest(api, runId, 0, print);
    });
}

