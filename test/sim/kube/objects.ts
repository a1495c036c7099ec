// The sim's generic object store: every discoverable resource (namespaced or cluster-scoped) can be
// read, listed, server-side applied, patched, created and deleted, with kube-apiserver's paths,
// status codes and Status bodies, so a manifest sync (talosctl upgrade-k8s, fluxcd's ssa) runs
// against it unchanged.
//
// Server-side apply, simplified but with the real rules (see fields.ts for the field paths):
// - each object keeps managedFields: per manager and operation (Apply or Update) the leaf paths it
//   owns, rendered as FieldsV1;
// - an apply sets every leaf of the applied configuration; leaves the same manager applied before
//   and omits now are removed unless another manager owns them too;
// - applying a value that differs from the live one at a leaf another manager owns is a 409
//   Conflict naming each field and manager, unless force=true moves the ownership;
// - applying the live value shares the ownership; an Update (merge or strategic merge patch,
//   create) takes the leaves it changed away from everyone else.
// What no client writes is kept apart and never owned: apiVersion, kind, the server-set metadata
// (name, namespace, uid, resourceVersion, generation, creationTimestamp, managedFields) and status,
// which only the sim's controllers set (writes to it through the main resource are dropped, as for
// every type with a status subresource).
import { randomUUID } from 'node:crypto';
import { parse as parseYaml } from 'yaml';
import { ApiTypes, apiVersionOf, type ApiType } from './discovery.ts';
import {
  deepEqual,
  deleteAt,
  dropNulls,
  fieldsV1,
  getAt,
  isObj,
  leaves,
  mergePatch,
  pathId,
  pathString,
  pruneItems,
  sameValue,
  setAt,
  type FieldPath,
  type Obj,
} from './fields.ts';

export interface KubeAnswer {
  code: number;
  body: unknown;
}

export interface ManagerEntry {
  manager: string;
  operation: 'Apply' | 'Update';
  apiVersion: string;
  time: string;
  fields: Map<string, FieldPath>;
}

export interface StoredObject {
  group: string;
  resource: string;
  /** The version it was last written through; HTTP reads render the version asked for. */
  version: string;
  kind: string;
  name: string;
  namespace: string | undefined;
  uid: string;
  resourceVersion: string;
  generation: number | undefined;
  creationTimestamp: string;
  /** Everything clients own: metadata.labels/annotations/..., spec, data, rules, ... */
  body: Obj;
  status: Obj | undefined;
  managers: ManagerEntry[];
}

export interface ObjectEvent {
  obj: StoredObject;
  change: 'created' | 'updated' | 'deleted';
  /** Something outside metadata and status changed (what moves metadata.generation). */
  specChanged: boolean;
  /** Put there by the test (putObject, setDaemonSet), i.e. long settled, not written over the API. */
  seeded: boolean;
}

export interface StoreRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  contentType: string;
  userAgent: string;
  body: unknown;
}

export function failure(code: number, reason: string, message: string, details?: object): object {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

const notServed = (): KubeAnswer => ({ code: 404, body: failure(404, 'NotFound', 'the server could not find the requested resource', {}) });
const methodNotAllowed = (): KubeAnswer => ({ code: 405, body: failure(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {}) });
const badRequest = (message: string): KubeAnswer => ({ code: 400, body: failure(400, 'BadRequest', message) });
const qualified = (t: { group: string; resource: string }): string => (t.group ? `${t.resource}.${t.group}` : t.resource);
const subject = (t: { group: string; resource: string }, name: string): object => ({ name, ...(t.group ? { group: t.group } : {}), kind: t.resource });

function notFound(t: { group: string; resource: string }, name: string): KubeAnswer {
  return { code: 404, body: failure(404, 'NotFound', `${qualified(t)} "${name}" not found`, subject(t, name)) };
}

/** An invalid options object (PatchOptions, DeleteOptions): 422 with one cause per field, worded like field.ErrorList. */
function invalidOptions(kind: string, errs: Array<{ field: string; reason: string; message: string }>): KubeAnswer {
  const lines = errs.map((e) => `${e.field}: ${e.message}`);
  const message = `${kind}.meta.k8s.io "" is invalid: ${lines.length === 1 ? lines[0] : `[${lines.join(', ')}]`}`;
  return { code: 422, body: failure(422, 'Invalid', message, { group: 'meta.k8s.io', kind, causes: errs }) };
}

const PATCH_TYPES = ['application/json-patch+json', 'application/merge-patch+json', 'application/strategic-merge-patch+json', 'application/apply-patch+yaml'];
const APPLY = 'application/apply-patch+yaml';

/** Decodes a request body the way its content type says; JSON is valid YAML, so apply accepts both. */
export function decodeBody(contentType: string, text: string): { body: unknown } | { error: KubeAnswer } {
  if (!text) return { body: null };
  try {
    return { body: contentType === APPLY ? parseYaml(text) : JSON.parse(text) };
  } catch (err) {
    const detail = err instanceof Error ? err.message.split('\n')[0] : String(err);
    return { error: badRequest(contentType === APPLY ? `error decoding YAML: ${detail}` : `couldn't decode the request body: ${detail}`) };
  }
}

// What StripMetaManager keeps out of managedFields, plus the other fields only the server sets.
const SERVER_META = new Set(['name', 'namespace', 'uid', 'resourceVersion', 'generation', 'creationTimestamp', 'managedFields', 'selfLink', 'deletionTimestamp', 'deletionGracePeriodSeconds']);

/** The part of a written object clients own. */
function ownedPart(obj: Obj): Obj {
  const { apiVersion: _a, kind: _k, status: _s, metadata, ...rest } = dropNulls(obj) as Obj;
  const meta = isObj(metadata) ? Object.fromEntries(Object.entries(metadata).filter(([k]) => !SERVER_META.has(k))) : {};
  return Object.keys(meta).length ? { metadata: meta, ...rest } : rest;
}

const withoutMeta = ({ metadata: _m, ...rest }: Obj): Obj => rest;
const now = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const entryId = (e: { manager: string; operation: string }): string => `${e.operation}\0${e.manager}`;
const sameOwnership = (a: ManagerEntry[], b: ManagerEntry[]): boolean =>
  a.length === b.length && a.every((e, i) => entryId(e) === entryId(b[i]!) && e.fields.size === b[i]!.fields.size && [...e.fields.keys()].every((k) => b[i]!.fields.has(k)));

function copyStored(o: StoredObject): StoredObject {
  return { ...o, body: structuredClone(o.body), status: o.status && structuredClone(o.status), managers: o.managers.map((e) => ({ ...e, fields: new Map(e.fields) })) };
}

/** Kubernetes' conflict wording: `"manager"` for an applier, `"manager" using apps/v1` for an updater. */
const printManager = (e: ManagerEntry): string => (e.operation === 'Update' ? `"${e.manager}" using ${e.apiVersion}` : `"${e.manager}"`);

function conflictMessage(conflicts: Array<{ path: FieldPath; owner: ManagerEntry }>): string {
  if (conflicts.length === 1) return `Apply failed with 1 conflict: conflict with ${printManager(conflicts[0]!.owner)}: ${pathString(conflicts[0]!.path)}`;
  const byManager = new Map<string, { owner: ManagerEntry; paths: string[] }>();
  for (const c of conflicts) {
    const m = byManager.get(entryId(c.owner)) ?? { owner: c.owner, paths: [] };
    m.paths.push(pathString(c.path));
    byManager.set(entryId(c.owner), m);
  }
  const lines = [...byManager.values()].sort((a, b) => a.owner.manager.localeCompare(b.owner.manager)).flatMap((m) => [`conflicts with ${printManager(m.owner)}:`, ...m.paths.map((p) => `- ${p}`)]);
  return `Apply failed with ${conflicts.length} conflicts: ${lines.join('\n')}`;
}

/** Equality-based label selectors and existence (`k=v`, `k!=v`, `k`, `!k`). */
function labelFilter(selector: string): ((labels: Record<string, string>) => boolean) | string {
  const tests: Array<(labels: Record<string, string>) => boolean> = [];
  for (const part of selector.split(',').map((p) => p.trim()).filter(Boolean)) {
    const m = /^(!?)([A-Za-z0-9._/-]+)(?:\s*(==|=|!=)\s*([A-Za-z0-9._-]*))?$/.exec(part);
    if (!m) return `unable to parse requirement: ${part}`;
    const [, not, key, op, value] = m as unknown as [string, string, string, string | undefined, string | undefined];
    if (op === undefined) tests.push((l) => (key in l) !== (not === '!'));
    else if (not) return `unable to parse requirement: ${part}`;
    else tests.push((l) => (l[key] === value) === (op !== '!='));
  }
  return (labels) => tests.every((t) => t(labels));
}

const PROTECTED_NAMESPACES = new Set(['default', 'kube-system', 'kube-public']);
const CRD = { group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' };

export class ObjectStore {
  readonly types = new ApiTypes();
  private readonly objects = new Map<string, StoredObject>();
  private lastRv = 0;
  private readonly watchers: Array<(e: ObjectEvent) => void> = [];

  /** `external`: group/resource pairs the caller serves from its own models (nodes, pods). */
  constructor(private readonly external: Set<string> = new Set()) {
    for (const ns of ['default', 'kube-node-lease', 'kube-public', 'kube-system']) {
      this.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }, 'kube-apiserver', 'Update');
    }
  }

  /** Called after every stored change, before the answer is rendered: controllers set status here. */
  watch(fn: (e: ObjectEvent) => void): void {
    this.watchers.push(fn);
  }

  private key(t: { group: string; resource: string }, ns: string | undefined, name: string): string {
    return `${t.group}/${t.resource}/${ns ?? ''}/${name}`;
  }

  private nextRv(): string {
    return String(++this.lastRv);
  }

  get resourceVersion(): string {
    return String(this.lastRv);
  }

  namespaceExists(ns: string): boolean {
    return this.objects.has(this.key({ group: '', resource: 'namespaces' }, undefined, ns));
  }

  /** Answers a request under /api/v1 or /apis/<group>[/<version>]; undefined leaves it to the caller. */
  serve(req: StoreRequest): KubeAnswer | undefined {
    const seg = req.path.split('/').slice(1).map(decodeURIComponent);
    let group: string;
    let rest: string[];
    if (seg[0] === 'api' && seg.length >= 2) {
      group = '';
      rest = seg.slice(1);
    } else if (seg[0] === 'apis' && seg.length >= 2) {
      group = seg[1]!;
      rest = seg.slice(2);
      if (!rest.length) {
        const g = this.types.group(group);
        if (req.method !== 'GET') return methodNotAllowed();
        return g ? { code: 200, body: { kind: 'APIGroup', apiVersion: 'v1', ...g } } : notServed();
      }
    } else return undefined;
    const version = rest.shift()!;
    if (!rest.length) {
      if (req.method !== 'GET') return methodNotAllowed();
      const list = this.types.resourceList(group, version);
      return list ? { code: 200, body: list } : notServed();
    }
    // `/namespaces/x/status` is the namespace's own subresource, `/namespaces/x/<resource>` a namespaced collection.
    let ns: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3 && !(rest.length === 3 && ['status', 'finalize'].includes(rest[2]!))) {
      ns = rest[1];
      rest = rest.slice(2);
    }
    const [resource, name, sub, ...extra] = rest as [string, string | undefined, string | undefined];
    const t = this.types.byResource(group, version, resource);
    if (!t || extra.length || (ns !== undefined && !t.namespaced) || (ns === undefined && t.namespaced && name !== undefined)) return notServed();
    if (this.external.has(`${group}/${resource}`)) return undefined;
    if (sub !== undefined) return sub === 'status' && req.method === 'GET' ? this.get(t, ns, name!) : notServed();
    switch (req.method) {
      case 'GET':
        return name === undefined ? this.list(t, ns, req.query) : this.get(t, ns, name);
      case 'PATCH':
        return name === undefined ? methodNotAllowed() : this.patch(t, ns, name, req);
      case 'POST':
        return name === undefined ? this.create(t, ns, req) : methodNotAllowed();
      case 'DELETE':
        return name === undefined ? methodNotAllowed() : this.remove(t, ns, name, req);
      default:
        return methodNotAllowed();
    }
  }

  private get(t: ApiType, ns: string | undefined, name: string): KubeAnswer {
    const o = this.objects.get(this.key(t, ns, name));
    return o ? { code: 200, body: this.render(o, t) } : notFound(t, name);
  }

  private list(t: ApiType, ns: string | undefined, query: URLSearchParams): KubeAnswer {
    const match = labelFilter(query.get('labelSelector') ?? '');
    if (typeof match === 'string') return badRequest(match);
    const items = [...this.objects.values()]
      .filter((o) => o.group === t.group && o.resource === t.resource && (ns === undefined || o.namespace === ns))
      .filter((o) => match((isObj(o.body.metadata) && isObj(o.body.metadata.labels) ? o.body.metadata.labels : {}) as Record<string, string>))
      .sort((a, b) => (a.namespace ?? '').localeCompare(b.namespace ?? '') || a.name.localeCompare(b.name))
      .map((o) => {
        // Typed lists of built-in kinds leave apiVersion and kind off their items; unstructured ones keep them.
        const { apiVersion, kind, ...item } = this.render(o, t);
        return t.custom ? { apiVersion, kind, ...item } : item;
      });
    return { code: 200, body: { kind: `${t.kind}List`, apiVersion: apiVersionOf(t), metadata: { resourceVersion: this.resourceVersion }, items } };
  }

  private render(o: StoredObject, t?: ApiType): Obj {
    const { metadata, ...rest } = o.body;
    return structuredClone({
      apiVersion: apiVersionOf(t ?? { group: o.group, version: o.version }),
      kind: o.kind,
      metadata: {
        name: o.name,
        ...(o.namespace !== undefined ? { namespace: o.namespace } : {}),
        uid: o.uid,
        resourceVersion: o.resourceVersion,
        ...(o.generation !== undefined ? { generation: o.generation } : {}),
        creationTimestamp: o.creationTimestamp,
        ...(isObj(metadata) ? metadata : {}),
        managedFields: o.managers.map((e) => ({
          manager: e.manager,
          operation: e.operation,
          apiVersion: e.apiVersion,
          time: e.time,
          fieldsType: 'FieldsV1',
          fieldsV1: fieldsV1(e.fields.values()),
        })),
      },
      ...rest,
      ...(o.status ? { status: o.status } : {}),
    });
  }

  private fresh(t: ApiType, ns: string | undefined, name: string): StoredObject {
    return {
      group: t.group,
      resource: t.resource,
      version: t.version,
      kind: t.kind,
      name,
      namespace: ns,
      uid: randomUUID(),
      resourceVersion: '',
      generation: undefined,
      creationTimestamp: now(),
      body: {},
      status: undefined,
      managers: [],
    };
  }

  /** The checks PatchOptions and the patch/apply handlers run before touching the object. */
  private patchOptions(query: URLSearchParams, apply: boolean): { manager: string; force: boolean; dryRun: boolean } | KubeAnswer {
    const errs: Array<{ field: string; reason: string; message: string }> = [];
    const manager = query.get('fieldManager') ?? '';
    const force = query.get('force');
    if (apply && !manager) errs.push({ field: 'fieldManager', reason: 'FieldValueRequired', message: 'Required value: is required for apply patch' });
    if (!apply && force !== null) errs.push({ field: 'force', reason: 'FieldValueForbidden', message: 'Forbidden: may not be specified for non-apply patch' });
    const dryRun = query.getAll('dryRun');
    if (dryRun.some((d) => d !== 'All')) errs.push({ field: 'dryRun', reason: 'FieldValueNotSupported', message: `Unsupported value: ${JSON.stringify(dryRun)}: supported values: "All"` });
    if (errs.length) return invalidOptions('PatchOptions', errs);
    return { manager, force: force === 'true' || force === '1', dryRun: dryRun.length > 0 };
  }

  /** An Update's manager: fieldManager, else the User-Agent's product name, as the apiserver infers it. */
  private updater(req: StoreRequest): string {
    return req.query.get('fieldManager') || req.userAgent.split('/')[0]!.slice(0, 128);
  }

  private checkIdentity(t: ApiType, obj: Obj, ns: string | undefined, name: string | undefined): KubeAnswer | undefined {
    if (obj.apiVersion !== apiVersionOf(t) || obj.kind !== t.kind) {
      const [g, v] = String(obj.apiVersion ?? '').includes('/') ? String(obj.apiVersion).split('/') : ['', String(obj.apiVersion ?? '')];
      return badRequest(`invalid object type: ${g}/${v}, Kind=${String(obj.kind ?? '')}`);
    }
    const meta = isObj(obj.metadata) ? obj.metadata : {};
    if (name !== undefined && meta.name !== name) return badRequest(`the name of the object (${String(meta.name ?? '')}) does not match the name on the URL (${name})`);
    if (ns !== undefined && meta.namespace !== undefined && meta.namespace !== ns) {
      return badRequest(`the namespace of the object (${String(meta.namespace)}) does not match the namespace on the request (${ns})`);
    }
    return undefined;
  }

  private patch(t: ApiType, ns: string | undefined, name: string, req: StoreRequest): KubeAnswer {
    const served = t.custom ? PATCH_TYPES.filter((p) => !p.startsWith('application/strategic')) : PATCH_TYPES;
    if (!served.includes(req.contentType) || req.contentType === 'application/json-patch+json') {
      const message = `the body of the request was in an unknown format - accepted media types include: ${served.filter((p) => !p.startsWith('application/json-patch')).join(', ')}`;
      return { code: 415, body: failure(415, 'UnsupportedMediaType', message) };
    }
    const apply = req.contentType === APPLY;
    const opts = this.patchOptions(req.query, apply);
    if ('code' in opts) return opts;
    if (!isObj(req.body)) return badRequest(apply ? 'error decoding YAML: the body is not an object' : 'the patch is not a JSON object');
    return apply ? this.apply(t, ns, name, req.body, opts) : this.update(t, ns, name, req, opts.dryRun);
  }

  private apply(t: ApiType, ns: string | undefined, name: string, cfg: Obj, opts: { manager: string; force: boolean; dryRun: boolean; seeded?: boolean }): KubeAnswer {
    const wrong = this.checkIdentity(t, cfg, ns, name);
    if (wrong) return wrong;
    const live = this.objects.get(this.key(t, ns, name));
    // Seeds skip admission, the namespace lifecycle check included.
    if (!live && ns !== undefined && !opts.seeded && !this.namespaceExists(ns)) return notFound({ group: '', resource: 'namespaces' }, ns);
    const rv = isObj(cfg.metadata) ? cfg.metadata.resourceVersion : undefined;
    if (live && rv !== undefined && rv !== live.resourceVersion) {
      const message = `Operation cannot be fulfilled on ${qualified(t)} "${name}": the object has been modified; please apply your changes to the latest version and try again`;
      return { code: 409, body: failure(409, 'Conflict', message, subject(t, name)) };
    }
    const next = live ? copyStored(live) : this.fresh(t, ns, name);
    const applied = leaves(ownedPart(cfg));
    const id = entryId({ manager: opts.manager, operation: 'Apply' });
    const others = next.managers.filter((e) => entryId(e) !== id);
    const conflicts: Array<{ path: FieldPath; owner: ManagerEntry }> = [];
    for (const [pid, { path, value }] of applied) {
      const current = getAt(next.body, path);
      if (current === undefined || sameValue(current, value)) continue;
      for (const owner of others) if (owner.fields.has(pid)) conflicts.push({ path, owner });
    }
    if (conflicts.length && !opts.force) {
      const causes = conflicts.map((c) => ({ reason: 'FieldManagerConflict', message: `conflict with ${printManager(c.owner)}`, field: pathString(c.path) }));
      return { code: 409, body: failure(409, 'Conflict', conflictMessage(conflicts), { causes }) };
    }
    for (const c of conflicts) c.owner.fields.delete(pathId(c.path));
    const mine = next.managers.find((e) => entryId(e) === id);
    for (const [pid, path] of mine?.fields ?? []) {
      if (!applied.has(pid) && !others.some((e) => e.fields.has(pid))) deleteAt(next.body, path);
    }
    for (const { path, value } of applied.values()) setAt(next.body, path, value);
    const entry: ManagerEntry = { manager: opts.manager, operation: 'Apply', apiVersion: apiVersionOf(t), time: mine?.time ?? now(), fields: new Map([...applied].map(([k, v]) => [k, v.path])) };
    next.managers = mine ? next.managers.map((e) => (e === mine ? entry : e)) : [...next.managers, entry];
    return this.commit(t, live, next, { actor: entry, dryRun: opts.dryRun, seeded: opts.seeded ?? false });
  }

  /** Merge and strategic merge patches: an Update that owns what it changed. */
  private update(t: ApiType, ns: string | undefined, name: string, req: StoreRequest, dryRun: boolean): KubeAnswer {
    const live = this.objects.get(this.key(t, ns, name));
    if (!live) return notFound(t, name);
    const next = copyStored(live);
    const strategic = req.contentType === 'application/strategic-merge-patch+json';
    const patched = mergePatch({ ...live.body, metadata: live.body.metadata ?? {} }, ownedPatch(req.body as Obj), strategic) as Obj;
    next.body = ownedPart(patched);
    const actor = this.takeChanged(next, live.body, this.updater(req), apiVersionOf(t));
    return this.commit(t, live, next, { actor, dryRun, seeded: false });
  }

  private create(t: ApiType, ns: string | undefined, req: StoreRequest): KubeAnswer {
    const opts = this.patchOptions(req.query, false);
    if ('code' in opts) return opts;
    if (!isObj(req.body)) return badRequest('the object is not a JSON object');
    const obj = req.body;
    const meta = isObj(obj.metadata) ? obj.metadata : {};
    const name = typeof meta.name === 'string' && meta.name ? meta.name : typeof meta.generateName === 'string' && meta.generateName ? `${meta.generateName}${randomUUID().slice(0, 5)}` : '';
    if (ns !== undefined && meta.namespace !== undefined && meta.namespace !== ns) return badRequest('the namespace of the provided object does not match the namespace sent on the request');
    const wrong = this.checkIdentity(t, obj, undefined, undefined);
    if (wrong) return wrong;
    if (!name) {
      const cause = { reason: 'FieldValueRequired', message: 'Required value: name or generateName is required', field: 'metadata.name' };
      return { code: 422, body: failure(422, 'Invalid', `${t.kind} "" is invalid: metadata.name: ${cause.message}`, { ...subject(t, ''), kind: t.kind, causes: [cause] }) };
    }
    if (this.objects.has(this.key(t, ns, name))) return { code: 409, body: failure(409, 'AlreadyExists', `${qualified(t)} "${name}" already exists`, subject(t, name)) };
    if (ns !== undefined && !this.namespaceExists(ns)) return notFound({ group: '', resource: 'namespaces' }, ns);
    const next = this.fresh(t, ns, name);
    next.body = ownedPart(obj);
    const actor = this.takeChanged(next, {}, this.updater(req), apiVersionOf(t));
    return this.commit(t, undefined, next, { actor, dryRun: opts.dryRun, seeded: false });
  }

  /** Gives `manager`'s Update entry the leaves that differ from `before`, taking them from every other manager. */
  private takeChanged(next: StoredObject, before: Obj, manager: string, apiVersion: string): ManagerEntry | undefined {
    const old = leaves(before);
    const cur = leaves(next.body);
    const changed = [...cur].filter(([pid, l]) => !deepEqual(old.get(pid)?.value, l.value));
    const gone = [...old.keys()].filter((pid) => !cur.has(pid));
    for (const e of next.managers) for (const pid of [...changed.map(([k]) => k), ...gone]) e.fields.delete(pid);
    if (!changed.length) return undefined;
    const id = entryId({ manager, operation: 'Update' });
    let entry = next.managers.find((e) => entryId(e) === id);
    if (!entry) next.managers.push((entry = { manager, operation: 'Update', apiVersion, time: now(), fields: new Map() }));
    for (const [pid, l] of changed) entry.fields.set(pid, l.path);
    return entry;
  }

  /** Stores `next` unless nothing changed; an unchanged write keeps resourceVersion, generation and managedFields times. */
  private commit(t: ApiType, live: StoredObject | undefined, next: StoredObject, how: { actor: ManagerEntry | undefined; dryRun: boolean; seeded: boolean }): KubeAnswer {
    next.managers = next.managers.filter((e) => e.fields.size > 0);
    pruneItems(next.body, (pid) => next.managers.some((e) => e.fields.has(pid)));
    if (next.group === '' && next.resource === 'secrets') foldStringData(next.body);
    // A seed is the test's word on how things stand, an older Talos's selector included.
    const frozen = live && !how.seeded && immutableChange(t, next.name, live.body, next.body);
    if (frozen) return frozen;
    if (live && deepEqual(live.body, next.body) && sameOwnership(live.managers, next.managers)) return { code: 200, body: this.render(live, t) };
    const specChanged = !live || !deepEqual(withoutMeta(live.body), withoutMeta(next.body));
    if (t.generation) next.generation = !live ? 1 : (live.generation ?? 0) + (specChanged ? 1 : 0);
    if (how.actor) how.actor.time = now();
    next.version = t.version;
    if (!live) this.defaults(next);
    if (how.dryRun) return { code: live ? 200 : 201, body: this.render(next, t) };
    next.resourceVersion = this.nextRv();
    this.objects.set(this.key(next, next.namespace, next.name), next);
    if (next.group === CRD.group && next.resource === CRD.resource) this.establish(next);
    for (const w of this.watchers) w({ obj: next, change: live ? 'updated' : 'created', specChanged, seeded: how.seeded });
    return { code: live ? 200 : 201, body: this.render(next, t) };
  }

  /** What the apiserver's strategies fill in on create. */
  private defaults(o: StoredObject): void {
    if (o.group === '' && o.resource === 'namespaces') {
      setAt(o.body, ['metadata', 'labels', 'kubernetes.io/metadata.name'], o.name);
      if (!isObj(o.body.spec)) o.body.spec = { finalizers: ['kubernetes'] };
      o.status = { phase: 'Active' };
    }
  }

  private remove(t: ApiType, ns: string | undefined, name: string, req: StoreRequest): KubeAnswer {
    const opts = isObj(req.body) ? req.body : {};
    const policy = req.query.get('propagationPolicy') ?? (typeof opts.propagationPolicy === 'string' ? opts.propagationPolicy : undefined);
    const dryRun = [...req.query.getAll('dryRun'), ...(Array.isArray(opts.dryRun) ? (opts.dryRun as unknown[]).map(String) : [])];
    const errs: Array<{ field: string; reason: string; message: string }> = [];
    if (policy !== undefined && !['Foreground', 'Background', 'Orphan'].includes(policy)) {
      errs.push({ field: 'propagationPolicy', reason: 'FieldValueNotSupported', message: `Unsupported value: "${policy}": supported values: "Foreground", "Background", "Orphan", "nil"` });
    }
    if (dryRun.some((d) => d !== 'All')) errs.push({ field: 'dryRun', reason: 'FieldValueNotSupported', message: `Unsupported value: ${JSON.stringify(dryRun)}: supported values: "All"` });
    if (errs.length) return invalidOptions('DeleteOptions', errs);
    const live = this.objects.get(this.key(t, ns, name));
    if (!live) return notFound(t, name);
    const isNamespace = t.group === '' && t.resource === 'namespaces';
    if (isNamespace && PROTECTED_NAMESPACES.has(name)) {
      return { code: 403, body: failure(403, 'Forbidden', `namespaces "${name}" is forbidden: this namespace may not be deleted`, subject(t, name)) };
    }
    if (!dryRun.length) this.drop(live);
    if (isNamespace) {
      // A namespace answers with itself, Terminating; the sim's namespace controller finishes at once.
      const gone = copyStored(live);
      gone.status = { phase: 'Terminating' };
      const body = this.render(gone, t);
      (body.metadata as Obj).deletionTimestamp = now();
      return { code: 200, body };
    }
    // Without finalizers the object is gone at once; the registry then answers with a Success Status.
    return { code: 200, body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { ...subject(t, name), uid: live.uid } } };
  }

  private drop(o: StoredObject): void {
    this.objects.delete(this.key(o, o.namespace, o.name));
    this.lastRv++;
    if (o.group === '' && o.resource === 'namespaces') {
      for (const inner of [...this.objects.values()]) if (inner.namespace === o.name) this.drop(inner);
    }
    if (o.group === CRD.group && o.resource === CRD.resource) this.disestablish(o);
    for (const w of this.watchers) w({ obj: o, change: 'deleted', specChanged: false, seeded: false });
  }

  /** A CRD's served versions become resources, and its status says so, as the apiextensions controllers report. */
  private establish(crd: StoredObject): void {
    const spec = isObj(crd.body.spec) ? crd.body.spec : {};
    const names = isObj(spec.names) ? spec.names : {};
    const group = typeof spec.group === 'string' ? spec.group : '';
    const plural = typeof names.plural === 'string' ? names.plural : '';
    const kind = typeof names.kind === 'string' ? names.kind : '';
    if (!group || !plural || !kind) return;
    const versions = (Array.isArray(spec.versions) ? spec.versions : []).filter(isObj);
    for (const t of this.types.versionsOf(group, plural)) this.types.remove(group, t.version, plural);
    for (const v of versions) {
      if (v.served === false || typeof v.name !== 'string') continue;
      this.types.put({
        group,
        version: v.name,
        resource: plural,
        kind,
        namespaced: spec.scope !== 'Cluster',
        verbs: ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch'],
        ...(Array.isArray(names.shortNames) ? { shortNames: names.shortNames as string[] } : {}),
        ...(Array.isArray(names.categories) ? { categories: names.categories as string[] } : {}),
        generation: true,
        custom: true,
      });
    }
    const at = now();
    const cond = (type: string, reason: string, message: string): object => ({ type, status: 'True', lastTransitionTime: at, reason, message });
    crd.status = {
      conditions: [cond('NamesAccepted', 'NoConflicts', 'no conflicts found'), cond('Established', 'InitialNamesAccepted', 'the initial names have been accepted')],
      acceptedNames: { plural, singular: names.singular ?? kind.toLowerCase(), kind, listKind: names.listKind ?? `${kind}List`, ...(names.shortNames ? { shortNames: names.shortNames } : {}) },
      storedVersions: versions.filter((v) => v.storage === true).map((v) => v.name),
    };
  }

  private disestablish(crd: StoredObject): void {
    const spec = isObj(crd.body.spec) ? crd.body.spec : {};
    const names = isObj(spec.names) ? spec.names : {};
    if (typeof spec.group === 'string' && typeof names.plural === 'string') this.dropType(spec.group, names.plural);
  }

  /** Stops serving group/resource in every version and forgets its objects. */
  dropType(group: string, resource: string): void {
    for (const t of this.types.versionsOf(group, resource)) this.types.remove(group, t.version, resource);
    this.clear(group, resource);
  }

  clear(group: string, resource: string): void {
    for (const o of [...this.objects.values()]) if (o.group === group && o.resource === resource) this.drop(o);
  }

  /**
   * Stores `obj` as `manager` wrote it, skipping admission: a test's way to say who put it there.
   * Apply (the default, as Talos applies its bootstrap manifests) is a forced apply; Update
   * replaces the object the way a create or PUT does. Its status, if any, is kept.
   */
  put(obj: Obj, manager: string, operation: 'Apply' | 'Update' = 'Apply'): Obj {
    const t = this.types.byKind(String(obj.apiVersion), String(obj.kind));
    if (!t) throw new Error(`kube sim: no resource serves ${String(obj.apiVersion)} ${String(obj.kind)}`);
    const meta = isObj(obj.metadata) ? obj.metadata : {};
    const name = String(meta.name ?? '');
    const ns = t.namespaced ? String(meta.namespace ?? 'default') : undefined;
    if (!name) throw new Error('kube sim: putObject needs metadata.name');
    if (operation === 'Apply') {
      const answer = this.apply(t, ns, name, obj, { manager, force: true, dryRun: false, seeded: true });
      if (answer.code >= 300) throw new Error(`kube sim: putObject: ${JSON.stringify(answer.body)}`);
    } else {
      const live = this.objects.get(this.key(t, ns, name));
      const next = live ? copyStored(live) : this.fresh(t, ns, name);
      next.body = ownedPart(obj);
      const actor = this.takeChanged(next, live?.body ?? {}, manager, apiVersionOf(t));
      this.commit(t, live, next, { actor, dryRun: false, seeded: true });
    }
    // Set after the controllers ran: a seeded status is the test's word on how things stand.
    const stored = this.objects.get(this.key(t, ns, name))!;
    if (isObj(obj.status)) stored.status = structuredClone(obj.status);
    return this.render(stored, t);
  }

  /** A controller's status write: bumps resourceVersion like any write; ignored when the object is gone or was recreated. */
  setStatus(o: StoredObject, status: Obj): void {
    const cur = this.objects.get(this.key(o, o.namespace, o.name));
    if (cur?.uid !== o.uid) return;
    cur.status = status;
    cur.resourceVersion = this.nextRv();
  }

  stored(o: { group: string; resource: string; namespace: string | undefined; name: string }): StoredObject | undefined {
    return this.objects.get(this.key(o, o.namespace, o.name));
  }

  /** A deep copy of the object as served, or undefined. */
  object(apiVersion: string, kind: string, namespace: string | undefined, name: string): Obj | undefined {
    const t = this.types.byKind(apiVersion, kind);
    const o = t && this.objects.get(this.key(t, t.namespaced ? namespace : undefined, name));
    return o && this.render(o, t);
  }

  all(kind?: string): Obj[] {
    return [...this.objects.values()].filter((o) => kind === undefined || o.kind === kind).map((o) => this.render(o));
  }
}

/** Workloads whose selector the apiserver's validation refuses to change once set (apps/v1). */
const SELECTOR_FROZEN = new Set(['Deployment', 'DaemonSet', 'StatefulSet', 'ReplicaSet']);

/** The 422 an update of a frozen field gets, worded as field.ErrorList words it. */
function immutableChange(t: ApiType, name: string, before: Obj, after: Obj): KubeAnswer | undefined {
  if (t.group !== 'apps' || !SELECTOR_FROZEN.has(t.kind)) return undefined;
  const selector = (o: Obj): unknown => (isObj(o.spec) ? o.spec.selector : undefined);
  if (deepEqual(selector(before), selector(after))) return undefined;
  const cause = { reason: 'FieldValueInvalid', message: `Invalid value: ${JSON.stringify(selector(after))}: field is immutable`, field: 'spec.selector' };
  return { code: 422, body: failure(422, 'Invalid', `${t.kind}.${t.group} "${name}" is invalid: spec.selector: ${cause.message}`, { name, group: t.group, kind: t.kind, causes: [cause] }) };
}

/** A Secret's stringData is write-only: the apiserver stores it base64-encoded in data, over what data had. */
function foldStringData(body: Obj): void {
  const strings = body.stringData;
  if (!isObj(strings)) return;
  const data = isObj(body.data) ? body.data : {};
  for (const [k, v] of Object.entries(strings)) data[k] = Buffer.from(String(v)).toString('base64');
  body.data = data;
  delete body.stringData;
}

/** A patch's server-set parts (name, resourceVersion, status, ...) are not the client's to change. */
function ownedPatch(patch: Obj): Obj {
  const { apiVersion: _a, kind: _k, status: _s, metadata, ...rest } = patch;
  if (!isObj(metadata)) return rest;
  return { metadata: Object.fromEntries(Object.entries(metadata).filter(([k]) => !SERVER_META.has(k))), ...rest };
}
