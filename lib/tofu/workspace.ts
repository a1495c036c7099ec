import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { backendBlock, backendConfigArgs, backendEnv, backendSecrets } from './backend.ts';
import type { TofuBackend } from './backend.ts';
import { describeDiagnostic, fromStream, fromText } from './diagnostics.ts';
import { copyEntry, copyTree } from './copy-tree.ts';
import pLimit, { type LimitFunction } from 'p-limit';
import { pluginCacheDir, runTofu } from './executor.ts';
import type { TofuExecResult, TofuSubcommand } from './executor.ts';
import { isChangeSummary, isDiagnostic, isOutputs, isPlannedChange, toRunEvent } from './messages.ts';
import type { ChangeAction, ChangeSummaryMessage, RunEvent, TofuMessage } from './messages.ts';
import { Redactor } from './redact.ts';
import { RUN_DIR_PREFIX } from './run-files.ts';

export interface TofuWorkspaceOptions {
  binary: string;
  dataDir: string;
  tenantId: string;
  clusterId: string;
  /** The module to run, e.g. `modules/hetzner` (see moduleDirFor). */
  moduleDir: string;
  backend: TofuBackend;
  /** PATH for tofu (provider plugins may call helpers on it). */
  pathEnv: string;
  /** Provider credentials for the tenant, e.g. HCLOUD_TOKEN. Their values are treated as secrets. */
  env?: Record<string, string>;
  /** More strings that must never show in events or errors. */
  secrets?: string[];
  graceMs?: number;
  timeoutMs?: number;
  /** How long tofu waits for a held state lock, e.g. "30s". */
  lockTimeout?: string;
  /**
   * The run this workspace serves. With it, the work dir and run files live under
   * `runs/<runId>/` in the data dir: a run reaped while its tofu still runs never shares a
   * directory with the next run on the cluster, and clean-up can ask the database per run.
   */
  runId?: string;
}

export interface CommandHooks {
  signal?: AbortSignal;
  /** Redacted events for the run log. */
  onEvent?: (e: RunEvent) => void;
  /** Raw messages; they may carry secrets, keep them in memory only. */
  onMessage?: (m: TofuMessage) => void;
}

export interface PlanSummary {
  add: number;
  change: number;
  destroy: number;
}

export interface PlanResult {
  summary: PlanSummary;
  resources: { address: string; action: ChangeAction }[];
  /** Resources or outputs would change (tofu's -detailed-exitcode 2). */
  hasChanges: boolean;
  planFile?: string;
}

export interface ApplyResult {
  summary: PlanSummary;
  /** Root outputs as the apply stream reported them (values of sensitive ones are absent). */
  outputs: Record<string, TofuOutput>;
  /** Changes planned in the same process (applyVars only). */
  resources: { address: string; action: ChangeAction }[];
}

export interface TofuOutput {
  sensitive: boolean;
  type: unknown;
  value: unknown;
}

/** Files of one run that hold secrets (variables, the saved plan); removed by dispose(). */
export interface RunFiles {
  dir: string;
  varFile: string;
  planFile: string;
  dispose(): Promise<void>;
}

function describeEnd(r: Pick<TofuExecResult, 'exitCode' | 'canceled' | 'timedOut' | 'startError'>): string {
  if (r.startError) return `could not start (${r.startError})`;
  if (r.canceled) return 'was canceled';
  if (r.timedOut) return 'timed out';
  return `failed (exit ${r.exitCode ?? 'signal'})`;
}

export class TofuCommandError extends Error {
  constructor(
    readonly subcommand: TofuSubcommand,
    readonly result: Pick<TofuExecResult, 'exitCode' | 'canceled' | 'timedOut' | 'forceKilled' | 'startError'>,
    /** Scrubbed error diagnostics, each `summary: detail`, and the scrubbed tail of stderr. */
    readonly diagnostics: string[],
    readonly stderr: string,
  ) {
    const why = describeEnd(result);
    const first = diagnostics[0] ?? stderr.trim().split('\n').slice(-1)[0] ?? '';
    super(`tofu ${subcommand} ${why}${first ? `: ${first}` : ''}`);
    this.name = 'TofuCommandError';
  }
  get canceled(): boolean {
    return this.result.canceled;
  }
}

const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const KEEP_IN_WORKDIR = new Set(['.terraform', '.terraform.lock.hcl']);
export const BACKEND_FILE = '_backend.tf';

const INIT_STAMP = 'rezus-init.sha256';

async function filesUnder(dir: string, rel = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(path.join(dir, rel), { withFileTypes: true })) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) {
      if (!KEEP_IN_WORKDIR.has(e.name)) out.push(...(await filesUnder(dir, p)));
    } else if (!KEEP_IN_WORKDIR.has(e.name)) {
      out.push(p);
    }
  }
  return out;
}

/**
 * What `init` depends on in a synced work dir: the binary, the backend settings (the password is
 * not among them: it reaches tofu through the environment on every command), every module file
 * and the lock file.
 */
async function initStamp(dir: string, binary: string, backend: TofuBackend): Promise<string> {
  const hash = createHash('sha256');
  const field = (s: string | Buffer): void => {
    hash.update(String(s.length)).update(':').update(s);
  };
  field(binary);
  field(backend.kind);
  for (const a of backendConfigArgs(backend)) field(a);
  for (const f of (await filesUnder(dir)).sort()) {
    field(f);
    field(await readFile(path.join(dir, f)));
  }
  field(await readFile(path.join(dir, '.terraform.lock.hcl')).catch(() => Buffer.alloc(0)));
  return hash.digest('hex');
}

export function moduleDirFor(modulesRoot: string, provider: string): string {
  if (!ID.test(provider)) throw new Error(`invalid provider name ${JSON.stringify(provider)}`);
  return path.join(modulesRoot, provider);
}

export function workDirFor(dataDir: string, tenantId: string, clusterId: string): string {
  for (const [what, v] of [['tenant', tenantId], ['cluster', clusterId]] as const) {
    if (!ID.test(v) || v === '.' || v === '..') throw new Error(`invalid ${what} id ${JSON.stringify(v)}`);
  }
  return path.join(dataDir, 'work', tenantId, clusterId);
}

/**
 * Where a cluster's last successful init is kept between runs: each run works in a fresh
 * directory (see runDirFor), and re-initialising an unchanged module costs a tofu start-up and a
 * backend round trip. Holds `.terraform` (backend settings, module manifest, provider links into
 * the shared plugin cache; never credentials: those reach tofu through the environment) and the
 * lock file.
 */
export function initCacheDirFor(dataDir: string, tenantId: string, clusterId: string): string {
  workDirFor(dataDir, tenantId, clusterId);
  return path.join(dataDir, 'init-cache', tenantId, clusterId);
}

const INIT_CACHE_CURRENT = 'current';
const SNAPSHOT = /^snap-[0-9a-f-]{36}$/;
/** The snapshot `current` names, if it names one. */
const currentSnapshot = (root: string): Promise<string | null> =>
  readlink(path.join(root, INIT_CACHE_CURRENT)).then(
    (s) => (SNAPSHOT.test(s) ? s : null),
    () => null,
  );

/**
 * One init at a time per plugin cache: tofu documents its cache as not safe for concurrent use,
 * and two clusters' inits fetching the same provider into it at once could leave it torn. The
 * other commands only read it. Per process: one runner per data dir is the supported setup.
 */
const initQueues = new Map<string, LimitFunction>();
function initsOf(cacheDir: string): LimitFunction {
  let queue = initQueues.get(cacheDir);
  if (!queue) initQueues.set(cacheDir, (queue = pLimit(1)));
  return queue;
}

/** The directory of one run's work dir and files, when the workspace is opened for a run. */
export function runDirFor(dataDir: string, runId: string): string {
  if (!ID.test(runId) || !runId.startsWith(RUN_DIR_PREFIX)) throw new Error(`invalid run id ${JSON.stringify(runId)}`);
  return path.join(dataDir, 'runs', runId);
}

// In a module of its own, so the runner's start (which removes them) does not load tofu's driver.
export { RUN_DIR_PREFIX, removeStaleRunFiles } from './run-files.ts';

/** Every machine's user_data is a Talos machine config: a secret. */
/**
 * Every machine config in the variables: a module's `machines`, and the root module's
 * `machines_<provider>` maps (one per provider of a cluster).
 */
function userDataOf(vars: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const [name, machines] of Object.entries(vars)) {
    if (name !== 'machines' && !name.startsWith('machines_')) continue;
    if (!machines || typeof machines !== 'object') continue;
    for (const m of Object.values(machines as Record<string, unknown>)) {
      const u = m && typeof m === 'object' ? (m as Record<string, unknown>).user_data : undefined;
      if (typeof u === 'string') out.push(u);
    }
  }
  return out;
}

function summaryOf(m: ChangeSummaryMessage): PlanSummary {
  return { add: m.changes.add, change: m.changes.change, destroy: m.changes.remove };
}

export class TofuWorkspace {
  readonly dir: string;
  private readonly secrets = new Set<string>();
  private synced: Promise<void> | undefined;
  // The secret set only grows, so its size tells whether the redactor is current.
  private cachedRedactor: { size: number; redactor: Redactor } | undefined;

  constructor(private readonly opts: TofuWorkspaceOptions) {
    workDirFor(opts.dataDir, opts.tenantId, opts.clusterId);
    this.dir = opts.runId ? path.join(runDirFor(opts.dataDir, opts.runId), 'work') : workDirFor(opts.dataDir, opts.tenantId, opts.clusterId);
    for (const v of Object.values(opts.env ?? {})) this.secrets.add(v);
    for (const s of backendSecrets(opts.backend)) this.secrets.add(s);
    for (const s of opts.secrets ?? []) this.secrets.add(s);
  }

  /** Copies the module afresh (stale files from an older module version are removed) and writes the backend block. */
  async sync(): Promise<void> {
    const copy = this.copyModule();
    this.synced = copy;
    try {
      await copy;
    } catch (err) {
      if (this.synced === copy) this.synced = undefined;
      throw err;
    }
  }

  /** sync() unless this workspace object already did: the module does not change within a run. */
  private async ensureSynced(): Promise<void> {
    await (this.synced ?? this.sync());
  }

  private async copyModule(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await Promise.all(
      (await readdir(this.dir)).filter((e) => !KEEP_IN_WORKDIR.has(e)).map((e) => rm(path.join(this.dir, e), { recursive: true, force: true })),
    );
    await copyTree(this.opts.moduleDir, this.dir, (name) => !KEEP_IN_WORKDIR.has(name) && !name.endsWith('.tfstate'));
    await writeFile(path.join(this.dir, BACKEND_FILE), backendBlock(this.opts.backend), { mode: 0o600 });
  }

  /** A private directory for one run's variables and plan; call dispose() when the run ends. */
  async createRunFiles(vars: Record<string, unknown>): Promise<RunFiles> {
    for (const u of userDataOf(vars)) this.secrets.add(u);
    const root = this.opts.runId ? runDirFor(this.opts.dataDir, this.opts.runId) : path.join(this.opts.dataDir, 'runs');
    await mkdir(root, { recursive: true, mode: 0o700 });
    const dir = path.join(root, this.opts.runId ? `files-${randomUUID()}` : `${this.opts.tenantId}-${this.opts.clusterId}-${randomUUID()}`);
    await mkdir(dir, { mode: 0o700 });
    const varFile = path.join(dir, 'vars.tfvars.json');
    await writeFile(varFile, JSON.stringify(vars), { mode: 0o600, flag: 'wx' });
    return { dir, varFile, planFile: path.join(dir, 'run.tfplan'), dispose: () => rm(dir, { recursive: true, force: true }) };
  }

  /** Removes the run's directory (work dir and run files); only for a workspace opened with a runId. */
  async disposeRun(): Promise<void> {
    if (this.opts.runId) await rm(runDirFor(this.opts.dataDir, this.opts.runId), { recursive: true, force: true });
  }

  /** Adds strings to scrub (e.g. a token generated after the workspace was opened). */
  addSecrets(...secrets: string[]): void {
    for (const s of secrets) this.secrets.add(s);
  }

  /** Built once per set of secrets: with machine configs among them, building one costs milliseconds. */
  redactor(): Redactor {
    if (!this.cachedRedactor || this.cachedRedactor.size !== this.secrets.size) {
      this.cachedRedactor = { size: this.secrets.size, redactor: new Redactor(this.secrets) };
    }
    return this.cachedRedactor.redactor;
  }

  /**
   * `init`, skipped when the work dir was initialised by the same binary for the same backend
   * settings, module files and lock file (a stamp in `.terraform` records them): re-initialising
   * an unchanged work dir costs a tofu start-up and a backend round trip, for nothing.
   * Returns whether init ran.
   */
  async init(hooks: CommandHooks = {}): Promise<boolean> {
    return initsOf(pluginCacheDir(this.opts.dataDir))(() => this.initOnce(hooks));
  }

  private async initOnce(hooks: CommandHooks): Promise<boolean> {
    await this.sync();
    const stampFile = path.join(this.dir, '.terraform', INIT_STAMP);
    if (this.opts.runId) await this.restoreInit();
    const before = await initStamp(this.dir, this.opts.binary, this.opts.backend);
    if ((await readFile(stampFile, 'utf8').catch(() => null)) === before) return false;
    // A failed or interrupted init must not leave a stamp that claims success.
    await rm(stampFile, { force: true });
    await this.exec('init', ['-reconfigure', ...backendConfigArgs(this.opts.backend)], hooks);
    // init may have written the lock file, which is part of the stamp.
    await writeFile(stampFile, await initStamp(this.dir, this.opts.binary, this.opts.backend), { mode: 0o600 });
    if (this.opts.runId) await this.saveInit();
    return true;
  }

  private initCache(): string {
    return initCacheDirFor(this.opts.dataDir, this.opts.tenantId, this.opts.clusterId);
  }

  /**
   * Copies the cluster's kept init into this run's fresh work dir; the stamp inside it then
   * decides whether it fits. Snapshots are never changed once written, and the one read from is
   * only removed after `current` stopped naming it: a copy made while `current` kept naming the
   * same snapshot is whole. Anything else (no snapshot, a newer one swapped in meanwhile, an
   * error) leaves no init behind, and init simply runs.
   */
  private async restoreInit(): Promise<void> {
    const root = this.initCache();
    const snapshot = await currentSnapshot(root);
    if (!snapshot) return;
    try {
      for (const entry of await readdir(path.join(root, snapshot))) {
        if (KEEP_IN_WORKDIR.has(entry)) await copyEntry(path.join(root, snapshot, entry), path.join(this.dir, entry));
      }
      if ((await currentSnapshot(root)) === snapshot) return;
    } catch {
      // Falls through: no init kept.
    }
    for (const entry of KEEP_IN_WORKDIR) await rm(path.join(this.dir, entry), { recursive: true, force: true });
  }

  /**
   * Keeps this run's init for the cluster's next runs: copied into a new snapshot, then named by
   * `current` through an atomic rename of a symlink; the snapshot it replaced is removed.
   * Failing to keep it only costs the next run an init.
   */
  private async saveInit(): Promise<void> {
    const root = this.initCache();
    const id = randomUUID();
    const snapshot = `snap-${id}`;
    const link = path.join(root, `link-${id}`);
    const current = path.join(root, INIT_CACHE_CURRENT);
    try {
      await mkdir(path.join(root, snapshot), { recursive: true, mode: 0o700 });
      for (const entry of await readdir(this.dir)) {
        if (KEEP_IN_WORKDIR.has(entry)) await copyEntry(path.join(this.dir, entry), path.join(root, snapshot, entry));
      }
      const previous = await currentSnapshot(root);
      await symlink(snapshot, link);
      await rename(link, current);
      if (previous && previous !== snapshot) await rm(path.join(root, previous), { recursive: true, force: true });
    } catch {
      await rm(link, { force: true });
      if ((await currentSnapshot(root)) !== snapshot) await rm(path.join(root, snapshot), { recursive: true, force: true });
    }
  }

  async plan(o: CommandHooks & { varFile: string; destroy?: boolean; outFile?: string }): Promise<PlanResult> {
    await this.ensureSynced();
    const args = ['-detailed-exitcode', `-var-file=${o.varFile}`, ...this.lockArgs()];
    if (o.destroy) args.push('-destroy');
    if (o.outFile) args.push(`-out=${o.outFile}`);
    const summary: PlanSummary = { add: 0, change: 0, destroy: 0 };
    const resources: PlanResult['resources'] = [];
    const result = await this.exec('plan', args, o, (m) => {
      if (m.type === 'planned_change' && isPlannedChange(m)) resources.push({ address: m.change.resource.addr, action: m.change.action });
      if (isChangeSummary(m)) Object.assign(summary, summaryOf(m));
    }, [0, 2]);
    return { summary, resources, hasChanges: result.exitCode === 2, ...(o.outFile ? { planFile: o.outFile } : {}) };
  }

  /** Applies a saved plan; tofu refuses it if the state changed since the plan was made. */
  async apply(planFile: string, hooks: CommandHooks = {}): Promise<ApplyResult> {
    return this.applyWith([planFile], hooks);
  }

  /**
   * Plans and applies in one tofu process (`apply -auto-approve`): one start-up, one lock, and no
   * window between plan and apply in which the state could move.
   */
  async applyVars(o: CommandHooks & { varFile: string; destroy?: boolean }): Promise<ApplyResult> {
    return this.applyWith(['-auto-approve', `-var-file=${o.varFile}`, ...(o.destroy ? ['-destroy'] : [])], o);
  }

  private async applyWith(args: string[], hooks: CommandHooks): Promise<ApplyResult> {
    await this.ensureSynced();
    const summary: PlanSummary = { add: 0, change: 0, destroy: 0 };
    const outputs: Record<string, TofuOutput> = {};
    const resources: ApplyResult['resources'] = [];
    await this.exec('apply', [...this.lockArgs(), ...args], hooks, (m) => {
      if (m.type === 'planned_change' && isPlannedChange(m)) resources.push({ address: m.change.resource.addr, action: m.change.action });
      // Only the apply's own summary counts; a -auto-approve run also reports the plan's.
      if (isChangeSummary(m) && m.changes.operation !== 'plan') Object.assign(summary, summaryOf(m));
      if (isOutputs(m)) Object.assign(outputs, m.outputs as Record<string, TofuOutput>);
    });
    return { summary, outputs, resources };
  }

  /** `output -json`: values of sensitive outputs included, so never log the result whole. */
  async outputs(hooks: CommandHooks = {}): Promise<Record<string, TofuOutput>> {
    const r = await this.exec('output', [], hooks);
    const parsed = JSON.parse(r.stdout || '{}') as Record<string, TofuOutput>;
    return parsed;
  }

  /** `show -json <plan>`: the saved plan's resource_changes and prior_state. Holds variable values. */
  async showPlan(planFile: string, hooks: CommandHooks = {}): Promise<Record<string, unknown>> {
    const r = await this.exec('show', [planFile], hooks);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  }

  private lockArgs(): string[] {
    return this.opts.lockTimeout ? [`-lock-timeout=${this.opts.lockTimeout}`] : [];
  }

  private async exec(
    subcommand: TofuSubcommand,
    args: string[],
    hooks: CommandHooks,
    collect?: (m: TofuMessage) => void,
    okCodes: number[] = [0],
  ): Promise<TofuExecResult> {
    const redactor = this.redactor();
    const diagnostics: string[] = [];
    const result = await runTofu({
      binary: this.opts.binary,
      subcommand,
      args,
      cwd: this.dir,
      dataDir: this.opts.dataDir,
      pathEnv: this.opts.pathEnv,
      env: { ...this.opts.env, ...backendEnv(this.opts.backend) },
      signal: hooks.signal,
      graceMs: this.opts.graceMs,
      timeoutMs: this.opts.timeoutMs,
      onMessage: (m) => {
        if (isDiagnostic(m) && m.diagnostic.severity === 'error') diagnostics.push(describeDiagnostic(fromStream(m.diagnostic), redactor));
        collect?.(m);
        hooks.onMessage?.(m);
        hooks.onEvent?.(toRunEvent(m, { redactor }));
      },
    });
    if (result.protocolError) throw result.protocolError;
    if (result.canceled || result.timedOut || result.exitCode === undefined || !okCodes.includes(result.exitCode)) {
      // init speaks text only: its errors are on stderr in the same summary/detail shape.
      if (diagnostics.length === 0) diagnostics.push(...fromText(result.stderrTail).map((d) => describeDiagnostic(d, redactor)));
      throw new TofuCommandError(subcommand, result, diagnostics, redactor.text(result.stderrTail));
    }
    return result;
  }
}

const machineAddresses = z.record(
  z.string(),
  z.object({ ipv4: z.string().nullable(), ipv6: z.string().nullable() }),
);
export type MachineAddresses = z.infer<typeof machineAddresses>;

/** The `machines` output every module in modules/ provides: name → { ipv4, ipv6 }. */
export function machineAddressesFrom(outputs: Record<string, TofuOutput>): MachineAddresses {
  const out = outputs.machines;
  // A destroy reports the output as deleted, without a value.
  if (!out || out.value === undefined || out.value === null) return {};
  return machineAddresses.parse(out.value);
}
