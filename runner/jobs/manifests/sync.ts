// The bootstrap-manifest sync that ends `talosctl upgrade-k8s`: the manifests a control plane
// renders from its config (kube-proxy, CoreDNS, the CNI, RBAC, inline manifests) are applied to
// the cluster with server-side apply as field manager `talos`, recorded in Talos's inventory
// ConfigMap, objects an earlier sync applied and the manifests no longer name are pruned, and the
// objects that changed are waited for until ready. Talos itself applies them only once, at bootstrap.
//
// Object contents never reach an event or an error: the manifests carry the cluster's bootstrap
// token Secret. Only kinds, names, manifest ids, the paths of changed fields and container images
// are reported (content.ts).
import { errorMessage } from '../../../lib/errors.ts';
import { RunError } from '../../../lib/jobs/executor.ts';
import type { RunEventInput } from '../../../lib/jobs/types.ts';
import type { InventoryPolicy } from '../../../functions/manifests/job.ts';
import { isTransient, KubeApiError, pauseBeforeNextRead, retryAfterOf } from '../../../lib/kube/errors.ts';
import { applyObject, createObject, deleteObject, getObject, mergePatchObject, type StoredObject } from '../../../lib/kube/apply.ts';
import { objectPath, restMapper, type ResourceMapping, type RestMapper } from '../../../lib/kube/discovery.ts';
import type { KubeWriter } from '../../../lib/kube/drain.ts';
import { describeRef, parseRefKey, refKey, refOf, sameRef, type KubeObject, type ObjectRef } from '../../../lib/kube/object-ref.ts';
import { bootstrapManifestObjects, MANIFEST_TYPE, MANIFESTS_NAMESPACE } from '../../../lib/talos/manifests.ts';
import type { ClusterAccess } from '../cluster-access.ts';
import { pause } from '../pause.ts';
import { isWorkload, statusOf, type ObjectStatus } from './rollout.ts';
import { changedFields, describeFields, sameContent, type FieldChange } from './content.ts';

/** Talos's own names (pkg/machinery/constants), so talosctl and RezusCloud share one inventory and one owner. */
export const FIELD_MANAGER = 'talos';
export const INVENTORY_NAMESPACE = 'kube-system';
export const INVENTORY_NAME = 'talos-bootstrap-manifests-inventory';
export const INVENTORY_ANNOTATION = 'config.k8s.io/owning-inventory';

export type ManifestAction = 'created' | 'configured' | 'recreated' | 'unchanged' | 'deleted';

export interface ManifestChange {
  object: string;
  action: ManifestAction;
  /** The Talos manifest it came from; absent for a pruned object. */
  manifest?: string;
  /** For a configured object, the paths of the fields the apply changed (at most 50); for a recreated one, those that could not change. */
  fields?: string[];
}

export interface ManifestSyncResult {
  /** The control plane whose manifests were applied. */
  source: string;
  dryRun: boolean;
  changes: ManifestChange[];
  counts: Record<ManifestAction, number>;
}

export interface ManifestSyncOptions {
  /** Delete what an earlier sync applied and the manifests no longer name (talosctl: on unless --manifests-no-prune). */
  prune: boolean;
  /** Ask the server what would change; store nothing. */
  dryRun: boolean;
  /** Delete and create again an object whose immutable fields changed (talosctl --manifests-force). */
  recreate: boolean;
  /** Which existing objects the sync may take over and prune. */
  inventoryPolicy: InventoryPolicy;
  /** How long what the sync changed may take to be ready; 0 does not wait. */
  waitMs: number;
  pollMs: number;
  callDeadlineMs: number;
}

export interface ManifestSyncContext {
  access: ClusterAccess;
  kube: KubeWriter;
  /** Asked in order until one lists its manifests. */
  controlPlanes: Array<{ name: string; address: string }>;
  /** Aborted when the run must stop at once. */
  hard: AbortSignal;
  /** Aborted on a cancel too: the sync stops before its next write. */
  signal: AbortSignal;
  emit(event: RunEventInput): Promise<void>;
}

interface Planned {
  ref: ObjectRef;
  manifest: string;
  object: KubeObject;
  mapping?: ResourceMapping;
  before?: StoredObject;
}

/** Cluster-wide definitions first, then what workloads read, then the rest (go-kubernetes' stages). */
function stageOf(ref: ObjectRef): number {
  if (ref.kind === 'CustomResourceDefinition' || ref.kind === 'Namespace' || ref.kind === 'ClusterRole' || ref.kind.endsWith('Class')) return 0;
  if (ref.group === '' && (ref.kind === 'ConfigMap' || ref.kind === 'Secret')) return 1;
  return 2;
}

const inventoryMapping: ResourceMapping = { apiVersion: 'v1', kind: 'ConfigMap', resource: 'configmaps', namespaced: true };
const inventoryPath = objectPath(inventoryMapping, INVENTORY_NAMESPACE, INVENTORY_NAME);
const inventoryCollection = `/api/v1/namespaces/${INVENTORY_NAMESPACE}/configmaps`;

async function readManifests(ctx: ManifestSyncContext, o: ManifestSyncOptions): Promise<{ source: string; planned: Planned[] }> {
  const failures: string[] = [];
  for (const cp of ctx.controlPlanes) {
    try {
      const resources = await ctx.access.withTalos(cp.address, (c) => c.listResources({ namespace: MANIFESTS_NAMESPACE, type: MANIFEST_TYPE }, { deadlineMs: o.callDeadlineMs, signal: ctx.hard }));
      // None at all is a node that has not rendered them (yet): syncing nothing would prune everything.
      if (resources.length === 0) {
        failures.push(`${cp.name}: lists no bootstrap manifests`);
        continue;
      }
      const planned = bootstrapManifestObjects(resources).map(({ manifest, object }) => {
        const obj = object as KubeObject;
        return { ref: refOf(obj), manifest, object: obj };
      });
      return { source: cp.name, planned: dedupe(planned) };
    } catch (err) {
      ctx.hard.throwIfAborted();
      failures.push(`${cp.name}: ${errorMessage(err)}`);
    }
  }
  throw new RunError(`cannot read the bootstrap manifests from any control plane: ${failures.join('; ')}`, { problems: failures });
}

/** An object named twice (an inline manifest repeating a Talos one) is applied once, as its last definition. */
function dedupe(planned: Planned[]): Planned[] {
  const last = new Map<string, Planned>();
  for (const p of planned) last.set(refKey(p.ref), p);
  return [...last.values()];
}

/** The inventory ConfigMap as last read or written: whether it exists, and its keys. */
interface Inventory {
  exists: boolean;
  keys: Set<string>;
  refs: ObjectRef[];
}

async function readInventory(ctx: ManifestSyncContext): Promise<Inventory> {
  const cm = await getObject(ctx.kube, inventoryPath, ctx.hard);
  const keys = Object.keys((cm?.['data'] as Record<string, string> | undefined) ?? {});
  const refs: ObjectRef[] = [];
  for (const key of keys) {
    const ref = parseRefKey(key);
    if (ref) refs.push(ref);
    else await ctx.emit({ level: 'warn', type: 'manifests.inventory', message: `ignoring an inventory entry that names no object: ${key}` });
  }
  return { exists: cm !== undefined, keys: new Set(keys), refs };
}

/**
 * Makes the inventory's keys exactly `refs`, as go-kubernetes does with a whole-object update. Not
 * with server-side apply: keys another manager wrote (talosctl's updates, Talos at bootstrap) would
 * outlive their removal, and a pruned object's key would stay for ever. Unparsable keys stay.
 */
async function writeInventory(ctx: ManifestSyncContext, inv: Inventory, refs: ObjectRef[]): Promise<void> {
  const want = new Set(refs.map(refKey));
  const opts = { fieldManager: FIELD_MANAGER, signal: ctx.hard };
  const cm: KubeObject = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: INVENTORY_NAME, namespace: INVENTORY_NAMESPACE }, data: Object.fromEntries([...want].map((k) => [k, ''])) };
  if (!inv.exists && (await createObject(ctx.kube, inventoryCollection, cm, opts))) {
    inv.exists = true;
    inv.keys = want;
    return;
  }
  if (!inv.exists) Object.assign(inv, await readInventory(ctx));
  const gone = [...inv.keys].filter((k) => !want.has(k) && parseRefKey(k));
  await mergePatchObject(ctx.kube, inventoryPath, { data: { ...cm['data'] as Record<string, string>, ...Object.fromEntries(gone.map((k) => [k, null])) } }, opts);
  inv.keys = new Set([...[...inv.keys].filter((k) => !gone.includes(k)), ...want]);
}

const union = (a: ObjectRef[], b: ObjectRef[]): ObjectRef[] => [...a, ...b.filter((r) => !a.some((x) => sameRef(x, r)))];

/**
 * Why `policy` keeps this sync from taking over or pruning `obj` (go-kubernetes' checkInventoryPolicy);
 * undefined when it may: always for its own objects, for those no inventory owns unless the policy
 * is MustMatch, for another inventory's only under AdoptAll.
 */
function policyRefusal(obj: StoredObject | undefined, policy: InventoryPolicy): string | undefined {
  if (!obj) return undefined;
  const owner = obj.metadata.annotations?.[INVENTORY_ANNOTATION];
  if (owner === INVENTORY_NAME) return undefined;
  if (!owner) return policy === 'MustMatch' ? 'belongs to no inventory (policy MustMatch)' : undefined;
  return policy === 'AdoptAll' ? undefined : `belongs to inventory ${owner} (policy ${policy})`;
}

async function mapAll(mapper: RestMapper, planned: Planned[], allowMissing: (p: Planned) => boolean): Promise<void> {
  const missing: string[] = [];
  for (const p of planned) {
    p.mapping ??= await mapper.mapping(p.object.apiVersion, p.object.kind);
    if (!p.mapping && !allowMissing(p)) missing.push(`${describeRef(p.ref)} (${p.object.apiVersion}, manifest ${p.manifest})`);
  }
  if (missing.length) throw new RunError(`the Kubernetes API serves no such kind for: ${missing.join('; ')}`, { objects: missing });
}

const pathOf = (p: Planned): string => objectPath(p.mapping!, p.ref.namespace, p.ref.name);

/**
 * A kind a CustomResourceDefinition just applied defines is served once the server has
 * established it, a moment later: its objects wait for that (bounded), then fail as unserved.
 */
async function untilServed(ctx: ManifestSyncContext, mapper: RestMapper, stage: Planned[], o: ManifestSyncOptions): Promise<void> {
  const end = Date.now() + Math.max(o.waitMs, o.pollMs);
  for (;;) {
    await mapAll(mapper, stage, () => true);
    if (stage.every((p) => p.mapping) || Date.now() + o.pollMs > end) return mapAll(mapper, stage, () => false);
    await pause(o.pollMs, ctx.hard);
    mapper.reset();
  }
}

export async function syncManifests(ctx: ManifestSyncContext, o: ManifestSyncOptions): Promise<ManifestSyncResult> {
  const { source, planned } = await readManifests(ctx, o);
  const mapper = restMapper(ctx.kube, ctx.hard);
  // Kinds a CustomResourceDefinition of this same set defines are served only once it is applied.
  const definedHere = new Set(planned.filter((p) => p.ref.kind === 'CustomResourceDefinition').map((p) => String((p.object['spec'] as { group?: string } | undefined)?.group ?? '')));
  await mapAll(mapper, planned, (p) => definedHere.has(p.ref.group));
  const inventory = await readInventory(ctx);
  await ctx.emit({
    type: 'manifests.plan',
    message: `${planned.length} objects in the bootstrap manifests of ${source}${o.dryRun ? ' (dry run)' : ''}; the inventory holds ${inventory.refs.length}`,
    data: { source, objects: planned.length, inventory: inventory.refs.length, dryRun: o.dryRun },
  });

  for (const p of planned) if (p.mapping) p.before = await getObject(ctx.kube, pathOf(p), ctx.hard);
  const claimed = planned.flatMap((p) => {
    const why = policyRefusal(p.before, o.inventoryPolicy);
    return why ? [`${describeRef(p.ref)} ${why}`] : [];
  });
  if (claimed.length) throw new RunError(`refusing to sync the bootstrap manifests: ${claimed.join('; ')}`, { objects: claimed, inventoryPolicy: o.inventoryPolicy });

  // Recorded before anything is applied: a sync that dies half-way leaves every object it may have
  // created in the inventory, so the next one can still prune it. A ref that was never created is
  // dropped when pruning finds it gone.
  let recorded = union(inventory.refs, planned.map((p) => p.ref));
  if (!o.dryRun) await writeInventory(ctx, inventory, recorded);

  const changes: ManifestChange[] = [];
  const changed: Planned[] = [];
  // What a dry run cannot ask the server about: objects of a kind, or in a namespace, that this
  // same sync would create first. They would be created.
  const newNamespaces = new Set(planned.filter((p) => p.ref.group === '' && p.ref.kind === 'Namespace' && !p.before).map((p) => p.ref.name));
  const unaskable = (p: Planned): boolean => o.dryRun && (!p.mapping || newNamespaces.has(p.ref.namespace));
  const stages = [0, 1, 2].map((s) => planned.filter((p) => stageOf(p.ref) === s));
  for (const [s, stage] of stages.entries()) {
    if (s > 0 && stages[0]!.some((p) => p.ref.kind === 'CustomResourceDefinition')) {
      mapper.reset();
      if (o.dryRun) await mapAll(mapper, stage, () => true);
      else await untilServed(ctx, mapper, stage, o);
    }
    for (const p of stage) {
      ctx.signal.throwIfAborted();
      const { action, diff } = unaskable(p) ? { action: 'created' as const } : await applyOne(ctx, p, o);
      changes.push({ object: describeRef(p.ref), action, manifest: p.manifest, ...(diff ? { fields: diff.fields.map((f) => f.path) } : {}) });
      if (action !== 'unchanged') changed.push(p);
      await ctx.emit({
        type: 'manifests.apply',
        message: `${o.dryRun ? 'would be ' : ''}${action}: ${describeRef(p.ref)} (${p.manifest})${diff?.fields.length ? `; ${describeFields(diff)}${action === 'recreated' ? ' cannot change in place' : ''}` : ''}`,
        data: { object: describeRef(p.ref), action, manifest: p.manifest, dryRun: o.dryRun, ...(diff ? { fields: diff.fields, moreFields: diff.more } : {}) },
      });
    }
  }

  if (o.prune) recorded = await prune(ctx, mapper, inventory, recorded, planned, changes, o);
  if (!o.dryRun) await writeInventory(ctx, inventory, recorded);
  if (!o.dryRun && o.waitMs > 0) await waitUntilReady(ctx, changed, o);

  const counts: Record<ManifestAction, number> = { created: 0, configured: 0, recreated: 0, unchanged: 0, deleted: 0 };
  for (const c of changes) counts[c.action]++;
  return { source, dryRun: o.dryRun, changes, counts };
}

interface Applied {
  action: Exclude<ManifestAction, 'deleted'>;
  /** What a configured object's apply changed; the fields that could not change, for a recreated one. */
  diff?: { fields: FieldChange[]; more: number };
}

async function applyOne(ctx: ManifestSyncContext, p: Planned, o: ManifestSyncOptions): Promise<Applied> {
  const { dryRun } = o;
  const annotated: KubeObject = { ...p.object, metadata: { ...p.object.metadata, annotations: { ...p.object.metadata.annotations, [INVENTORY_ANNOTATION]: INVENTORY_NAME } } };
  const apply = (asDryRun: boolean) => applyObject(ctx.kube, pathOf(p), annotated, { fieldManager: FIELD_MANAGER, force: true, dryRun: asDryRun, signal: ctx.hard });
  const failed = (err: unknown, hint = ''): RunError => new RunError(`applying ${describeRef(p.ref)} (manifest ${p.manifest}) failed: ${errorMessage(err)}${hint}`, { object: describeRef(p.ref), manifest: p.manifest });
  let after: StoredObject;
  try {
    after = await apply(dryRun);
  } catch (err) {
    ctx.hard.throwIfAborted();
    if (!(err instanceof KubeApiError && err.immutable && p.before)) throw failed(err);
    if (!o.recreate) throw failed(err, '; a field that cannot change differs: sync with recreate (talosctl --manifests-force) to delete the object and create it again');
    const diff = { fields: err.fields.map((path) => ({ path })), more: 0 };
    if (dryRun) return { action: 'recreated', diff };
    await deleteUntilGone(ctx, p, o);
    try {
      await apply(false);
    } catch (again) {
      ctx.hard.throwIfAborted();
      throw failed(again, ' after it was deleted to be created again; the next sync creates it');
    }
    return { action: 'recreated', diff };
  }
  if (!p.before) return { action: 'created' };
  // A real apply that changed nothing keeps the resourceVersion; a dry run never moves it, so its result is compared.
  const unchanged = dryRun ? sameContent(p.before, after) : after.metadata.resourceVersion === p.before.metadata.resourceVersion;
  return unchanged ? { action: 'unchanged' } : { action: 'configured', diff: changedFields(p.before, after) };
}

/**
 * The object at `path` (undefined once the server has none), or the failure of a read the next
 * poll may get past. A wait ends at its deadline, not at the first blip of an apiserver the
 * Kubernetes upgrade this sync ends has just restarted (go-kubernetes' Manager.Wait retries these
 * too). A failure's Retry-After stretches the pause before the next read (pauseBeforeNextRead).
 */
async function readPolled(ctx: ManifestSyncContext, path: string): Promise<StoredObject | KubeApiError | undefined> {
  try {
    return await getObject(ctx.kube, path, ctx.hard);
  } catch (err) {
    ctx.hard.throwIfAborted();
    if (isTransient(err)) return err;
    throw err;
  }
}

const lastFailure = (err: KubeApiError): string => `last read failed: ${err.message}`;

/** pauseBeforeNextRead for the reads of one round, the longest any of them was asked to wait. */
const pollPause = (pollMs: number, end: number, reads: unknown[]): number => pauseBeforeNextRead(pollMs, Math.max(0, ...reads.map(retryAfterOf)), end - Date.now());

/** A deletion is waited for at least this long, whatever the rollout wait (0 skips that, not this). */
const GONE_WAIT_MIN_MS = 60_000;

/**
 * Deletes the object and waits until the server no longer has it (bounded: a finalizer may hold
 * it), so it can be created again. The inventory already names it, so a sync that stops in between
 * creates it next time.
 */
async function deleteUntilGone(ctx: ManifestSyncContext, p: Planned, o: ManifestSyncOptions): Promise<void> {
  ctx.signal.throwIfAborted();
  await deleteObject(ctx.kube, pathOf(p), ctx.hard);
  const waitMs = Math.max(o.waitMs, GONE_WAIT_MIN_MS);
  const end = Date.now() + waitMs;
  for (;;) {
    const live = await readPolled(ctx, pathOf(p));
    if (live === undefined) return;
    if (Date.now() + o.pollMs > end) {
      const why = live instanceof KubeApiError ? `cannot be seen gone after ${Math.round(waitMs / 1000)} s (${lastFailure(live)})` : `the server still has it after ${Math.round(waitMs / 1000)} s (a finalizer?)`;
      throw new RunError(`${describeRef(p.ref)} was deleted to be created again, but ${why}; the next sync creates it once it is gone`, { object: describeRef(p.ref) });
    }
    await pause(pollPause(o.pollMs, end, [live]), ctx.hard);
  }
}

async function prune(ctx: ManifestSyncContext, mapper: RestMapper, inventory: Inventory, recorded: ObjectRef[], planned: Planned[], changes: ManifestChange[], o: ManifestSyncOptions): Promise<ObjectRef[]> {
  const { dryRun } = o;
  let kept = recorded;
  const refused: string[] = [];
  for (const ref of recorded) {
    if (planned.some((p) => sameRef(p.ref, ref))) continue;
    ctx.signal.throwIfAborted();
    const mapping = await mapper.mappingOf(ref);
    const drop = (): void => void (kept = kept.filter((r) => !sameRef(r, ref)));
    if (!mapping) {
      // Its kind is no longer served (a CRD removed): nothing of it can be left to delete.
      drop();
      continue;
    }
    const path = objectPath(mapping, ref.namespace, ref.name);
    const current = await getObject(ctx.kube, path, ctx.hard);
    if (!current) {
      drop();
      continue;
    }
    const why = policyRefusal(current, o.inventoryPolicy);
    if (why) {
      refused.push(`${describeRef(ref)} ${why}`);
      continue;
    }
    if (!dryRun) await deleteObject(ctx.kube, path, ctx.hard);
    drop();
    changes.push({ object: describeRef(ref), action: 'deleted' });
    await ctx.emit({ type: 'manifests.prune', message: `${dryRun ? 'would be ' : ''}deleted: ${describeRef(ref)} (no manifest names it any more)`, data: { object: describeRef(ref), dryRun } });
  }
  if (refused.length) {
    if (!dryRun) await writeInventory(ctx, inventory, kept);
    throw new RunError(`not pruned: ${refused.join('; ')}`, { objects: refused });
  }
  return kept;
}

/**
 * Waits (up to `waitMs`) until every object the sync changed is ready by kstatus' rules. Most kinds
 * (RBAC, ConfigMaps, Services) are ready once applied: only those that are not yet, and the
 * workloads, are reported as waited for. An object whose status says it will not get there
 * (Stalled, a failed Job) fails the run at once.
 */
async function waitUntilReady(ctx: ManifestSyncContext, changed: Planned[], o: ManifestSyncOptions): Promise<void> {
  const end = Date.now() + o.waitMs;
  const last = new Map<Planned, ObjectStatus>();
  // This round's failed reads, for the pause before the next.
  let failed: KubeApiError[] = [];
  const isReady = async (p: Planned): Promise<boolean> => {
    const live = await readPolled(ctx, pathOf(p));
    if (live instanceof KubeApiError) failed.push(live);
    const status: ObjectStatus = live instanceof KubeApiError ? { state: 'in-progress', message: lastFailure(live) } : live ? statusOf(live) : { state: 'in-progress', message: 'not found' };
    last.set(p, status);
    if (status.state === 'failed') throw new RunError(`${describeRef(p.ref)} will not become ready: ${status.message}`, { object: describeRef(p.ref) });
    return status.state === 'current';
  };
  const ready = async (p: Planned): Promise<void> =>
    ctx.emit({ type: 'manifests.ready', message: `${isWorkload(p.ref) ? 'rolled out' : 'ready'}: ${describeRef(p.ref)}`, data: { object: describeRef(p.ref) } });

  let waiting: Planned[] = [];
  const readyWorkloads: Planned[] = [];
  for (const p of changed) {
    if (!(await isReady(p))) waiting.push(p);
    else if (isWorkload(p.ref)) readyWorkloads.push(p);
  }
  const reported = changed.filter((p) => waiting.includes(p) || readyWorkloads.includes(p));
  if (reported.length === 0) return;
  await ctx.emit({ type: 'manifests.wait', message: `waiting up to ${Math.round(o.waitMs / 1000)} s for ${reported.map((p) => describeRef(p.ref)).join(', ')} to be ready`, data: { objects: reported.map((p) => describeRef(p.ref)) } });
  for (const p of readyWorkloads) await ready(p);
  while (waiting.length) {
    if (Date.now() + o.pollMs > end) {
      const what = waiting.map((p) => `${describeRef(p.ref)} (${last.get(p)?.message ?? 'no status'})`);
      throw new RunError(`not ready within ${Math.round(o.waitMs / 1000)} s: ${what.join('; ')}`, { objects: what });
    }
    // A cancel ends the wait too: what it waits for is applied already.
    await pause(pollPause(o.pollMs, end, failed), ctx.signal);
    failed = [];
    const pending: Planned[] = [];
    for (const p of waiting) {
      if (await isReady(p)) await ready(p);
      else pending.push(p);
    }
    waiting = pending;
  }
}
