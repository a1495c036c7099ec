import type { Command } from 'commander';
import { readFile } from 'node:fs/promises';
import { text } from 'node:stream/consumers';
import type { Run } from '../api-types.ts';
import type { ApiClient } from '../client.ts';
import { usageError } from '../exit.ts';
import { printData, type OutputFormat } from '../output.ts';
import { resolveCluster } from '../resolve.ts';
import { progress, session } from '../session.ts';
import { waitForRun } from '../wait.ts';
import { exitCodeOf } from '../follow.ts';
import { submitRun } from './runs.ts';

interface ApplyOptions {
  file?: string;
  prune?: boolean;
  provision?: boolean;
  dryRun?: boolean;
  wait?: boolean;
}

async function readSpecSource(file: string): Promise<string> {
  if (file === '-') return text(process.stdin);
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw usageError(`${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
}

/**
 * plan, then approve only if the plan changes something: a cluster already provisioned as the file
 * says gets a plan run and nothing else. Returns the last run, or undefined if a run did not succeed.
 */
async function provisionCluster(api: ApiClient, clusterId: string, format: OutputFormat): Promise<Run[]> {
  const say = progress(format);
  const { run: planRun } = await api.json<{ run: Run }>('POST', `/v1/clusters/${clusterId}/provision`, { body: { mode: 'plan' } });
  say(`provision: plan run ${planRun.id}`);
  const planned = await waitForRun(api, planRun.id, format);
  if (planned.state !== 'succeeded' || !planned.result?.hasChanges) {
    say(planned.state === 'succeeded' ? 'provision: the cloud resources match, nothing to apply' : `provision: plan ${planned.state}${planned.error ? `: ${planned.error}` : ''}`);
    return [planned];
  }
  const { run: applyRun } = await api.json<{ run: Run }>('POST', `/v1/runs/${planned.id}/approve`);
  say(`provision: apply run ${applyRun.id}`);
  const applied = await waitForRun(api, applyRun.id, format);
  say(`provision: apply ${applied.state}${applied.error ? `: ${applied.error}` : ''}`);
  return [planned, applied];
}

async function applyFile(api: ApiClient, format: OutputFormat, opts: ApplyOptions & { file: string }): Promise<void> {
  const say = progress(format);
  // Loaded here: the spec schema and the differ are only this command's (start-up time of the others).
  const { parseSpecFile } = await import('../spec.ts');
  const { executeReconcile, pendingChanges, planReconcile, renderPlan, summarize } = await import('../reconcile.ts');
  const docs = parseSpecFile(await readSpecSource(opts.file), opts.file === '-' ? 'stdin' : opts.file);
  const report: unknown[] = [];
  let exit = 0;
  for (const doc of docs) {
    const plan = await planReconcile(api, doc, { prune: !!opts.prune });
    const label = `cluster ${doc.metadata.tenant}/${doc.metadata.name}`;
    const diff = renderPlan(plan);
    if (diff) say(diff.trimEnd());
    const pending = pendingChanges(plan);
    const counts = summarize(plan);
    const entry: Record<string, unknown> = {
      tenant: doc.metadata.tenant,
      cluster: doc.metadata.name,
      dryRun: !!opts.dryRun,
      changes: plan.changes.map(({ action, kind, name, fields }) => ({ action, kind, name, ...(fields ? { fields } : {}) })),
      summary: counts,
      warnings: plan.warnings,
    };
    report.push(entry);
    if (pending.length === 0) say(`${label}: no changes`);
    else if (opts.dryRun) say(`${label}: ${counts.create} to create, ${counts.update} to update, ${counts.delete} to delete (dry run, nothing changed)`);
    if (opts.dryRun) continue;
    const cluster = pending.length ? await executeReconcile(api, plan) : plan.cluster!;
    if (pending.length) say(`${label}: ${counts.create} created, ${counts.update} updated, ${counts.delete} deleted`);
    if (opts.provision) {
      const runs = await provisionCluster(api, cluster.id, format);
      entry.runs = runs.map((r) => ({ id: r.id, state: r.state, result: r.result, error: r.error }));
      exit = Math.max(exit, exitCodeOf(runs.at(-1)!));
    }
  }
  if (format !== 'table') printData(format, { clusters: report });
  process.exitCode = exit;
}

export function registerApply(program: Command): void {
  program
    .command('apply')
    .description('with -f: make clusters match a spec file (shows the diff, then creates/updates what differs); with a cluster: tofu plan+apply of its cloud machines')
    .argument('[cluster]', 'cluster name or id (without -f): provision it, plan and apply in one tofu run')
    .option('-f, --file <path>', 'a cluster spec (YAML, `---` between several; `-` for stdin); see cli/README.md')
    .option('--prune', 'with -f: delete machines the file does not list')
    .option('--provision', 'with -f: then plan, and apply the plan if it changes anything, waiting for both')
    .option('--dry-run', 'with -f: show the diff, change nothing')
    .option('-w, --wait', 'without -f: follow the run to its end; exit 0 only if it succeeded')
    .addHelpText(
      'after',
      `
Examples:
  rezus get cluster lab -o yaml > lab.yaml   # the spec of an existing cluster
  rezus apply -f lab.yaml --dry-run          # what would change
  rezus apply -f lab.yaml --provision        # change it, then plan/apply its cloud machines
  rezus apply lab --wait                     # provision only`,
    )
    .action(async (ref: string | undefined, opts: ApplyOptions, cmd: Command) => {
      if (opts.file && ref) throw usageError('give either -f <file> or a cluster, not both');
      if (!opts.file && (opts.prune || opts.provision || opts.dryRun)) throw usageError('--prune, --provision and --dry-run go with -f <file>');
      if (!opts.file && !ref) throw usageError('give -f <file> (a cluster spec) or the cluster to provision');
      const { api, format, opts: g } = await session(cmd);
      if (opts.file) return applyFile(api, format, { ...opts, file: opts.file });
      const cluster = await resolveCluster(api, ref!, g.tenant);
      await submitRun(api, format, `/v1/clusters/${cluster.id}/provision`, { mode: 'apply' }, opts);
    });
}
