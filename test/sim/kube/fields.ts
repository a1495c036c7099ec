// Field paths for the sim's server-side apply: a small structured-merge-diff without schemas.
// Ownership is tracked per leaf, as the apiserver does: an object's map keys are followed down to
// scalars, lists and empty maps, which are owned whole. Lists are atomic except the pod template's
// lists that the built-in schemas declare as maps (containers by name, volumeMounts by mountPath,
// ...): their items are followed like map entries, so two managers can own different containers.
// Paths print the way the apiserver words them in conflicts: `.spec.template.spec.containers[name="c"].image`.

export type Segment = string | { key: string; value: string };
export type FieldPath = Segment[];
export type Obj = Record<string, unknown>;

/** The lists the built-in schemas merge by a key (`x-kubernetes-list-type: map`), by field name. */
const KEYED_LISTS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
};

export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (!isObj(a) || !isObj(b)) return false;
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => k in b && deepEqual(a[k], b[k]));
}

/** The list's merge key, when `field` is merged by key and every item carries a distinct one. */
function listKey(field: string | undefined, list: unknown[]): string | undefined {
  const key = field === undefined ? undefined : KEYED_LISTS[field];
  if (!key) return undefined;
  const seen = new Set<string>();
  for (const item of list) {
    const v = isObj(item) ? item[key] : undefined;
    if (typeof v !== 'string' || seen.has(v)) return undefined;
    seen.add(v);
  }
  return key;
}

export const pathId = (p: FieldPath): string => JSON.stringify(p);

export function pathString(p: FieldPath): string {
  return p.map((s) => (typeof s === 'string' ? `.${s}` : `[${s.key}=${JSON.stringify(s.value)}]`)).join('');
}

/** Every owned leaf of `obj` with its value, keyed by pathId. */
export function leaves(obj: unknown): Map<string, { path: FieldPath; value: unknown }> {
  const out = new Map<string, { path: FieldPath; value: unknown }>();
  const walk = (v: unknown, path: FieldPath, field: string | undefined): void => {
    if (isObj(v) && Object.keys(v).length > 0) {
      for (const [k, child] of Object.entries(v)) walk(child, [...path, k], k);
      return;
    }
    const key = Array.isArray(v) && v.length > 0 ? listKey(field, v) : undefined;
    if (Array.isArray(v) && key) {
      for (const item of v as Obj[]) walk(item, [...path, { key, value: item[key] as string }], undefined);
      return;
    }
    if (path.length) out.set(pathId(path), { path, value: v });
  };
  walk(obj, [], undefined);
  return out;
}

/** An applied empty map claims the field without replacing what others put inside it. */
export function sameValue(live: unknown, applied: unknown): boolean {
  if (isObj(applied) && Object.keys(applied).length === 0) return isObj(live);
  return deepEqual(live, applied);
}

function child(v: unknown, s: Segment): unknown {
  if (typeof s === 'string') return isObj(v) ? v[s] : undefined;
  return Array.isArray(v) ? v.find((item) => isObj(item) && item[s.key] === s.value) : undefined;
}

export function getAt(obj: unknown, path: FieldPath): unknown {
  return path.reduce<unknown>((v, s) => child(v, s), obj);
}

/** Sets a leaf, creating the maps and keyed list items on the way (new items go last). */
export function setAt(obj: Obj, path: FieldPath, value: unknown): void {
  let cur: unknown = obj;
  for (let i = 0; i < path.length; i++) {
    const s = path[i]!;
    const last = i === path.length - 1;
    const next = path[i + 1];
    if (typeof s === 'string') {
      const o = cur as Obj;
      if (last) {
        if (!(isObj(value) && Object.keys(value).length === 0 && isObj(o[s]))) o[s] = structuredClone(value);
        return;
      }
      const wantList = typeof next === 'object';
      if (wantList ? !Array.isArray(o[s]) : !isObj(o[s])) o[s] = wantList ? [] : {};
      cur = o[s];
    } else {
      const list = cur as Obj[];
      let item = list.find((x) => isObj(x) && x[s.key] === s.value);
      if (!item) list.push((item = { [s.key]: s.value }));
      if (last) return;
      cur = item;
    }
  }
}

/**
 * Removes a leaf and the maps it leaves empty. A keyed item's key stays: the item goes only when
 * nothing else is left in it (see pruneItems), since another manager may still own part of it.
 */
export function deleteAt(obj: Obj, path: FieldPath): void {
  const parents: unknown[] = [obj];
  for (const s of path.slice(0, -1)) parents.push(child(parents.at(-1), s));
  const leaf = path.at(-1);
  const holder = parents.at(-1);
  if (typeof leaf !== 'string' || !isObj(holder)) return;
  const owner = path.at(-2);
  if (typeof owner === 'object' && owner.key === leaf) return;
  delete holder[leaf];
  for (let i = path.length - 2; i >= 0; i--) {
    const s = path[i]!;
    const node = parents[i + 1];
    if (typeof s !== 'string' || !isObj(node) || Object.keys(node).length > 0) return;
    delete (parents[i] as Obj)[s];
  }
}

/** Drops keyed list items left holding only their key that no manager claims, and lists left empty. */
export function pruneItems(obj: Obj, owned: (id: string) => boolean): void {
  const walk = (v: unknown, path: FieldPath): void => {
    if (!isObj(v)) return;
    for (const [k, list] of Object.entries(v)) {
      if (isObj(list)) walk(list, [...path, k]);
      if (!Array.isArray(list) || list.length === 0) continue;
      const key = listKey(k, list);
      if (!key) continue;
      const kept = (list as Obj[]).filter((item) => {
        const at: FieldPath = [...path, k, { key, value: item[key] as string }];
        walk(item, at);
        return Object.keys(item).length > 1 || owned(pathId([...at, key]));
      });
      if (kept.length) v[k] = kept;
      else delete v[k];
    }
  };
  walk(obj, []);
}

/** The `fieldsV1` document of a managedFields entry: `f:` for fields, `k:` for keyed items, `.` for the item itself. */
export function fieldsV1(paths: Iterable<FieldPath>): Obj {
  const root: Obj = {};
  for (const p of paths) {
    let cur = root;
    for (const s of p) {
      const k = typeof s === 'string' ? `f:${s}` : `k:${JSON.stringify({ [s.key]: s.value })}`;
      cur = (cur[k] ??= {}) as Obj;
      if (typeof s === 'object') cur['.'] ??= {};
    }
  }
  return root;
}

/**
 * RFC 7386 merge patch; `strategic` also merges the keyed lists by their key (with `$patch: delete`
 * items), as a strategic merge patch does. Other directives (`$setElementOrder`, `$retainKeys`)
 * only order or prune and are dropped.
 */
export function mergePatch(target: unknown, patch: unknown, strategic: boolean, field?: string): unknown {
  if (!isObj(patch)) {
    if (!strategic || !Array.isArray(patch) || !Array.isArray(target)) return structuredClone(patch);
    const key = listKey(field, patch);
    if (!key || !listKey(field, target)) return structuredClone(patch);
    const out = structuredClone(target) as Obj[];
    for (const item of patch as Obj[]) {
      const at = out.findIndex((x) => x[key] === item[key]);
      if (item.$patch === 'delete') {
        if (at >= 0) out.splice(at, 1);
      } else if (at >= 0) out[at] = mergePatch(out[at], item, true) as Obj;
      else out.push(mergePatch({}, item, true) as Obj);
    }
    return out;
  }
  const out: Obj = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (strategic && k.startsWith('$')) continue;
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v, strategic, k);
  }
  return out;
}

/** Removes nulls: in an applied configuration they state no opinion (`creationTimestamp: null`). */
export function dropNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(dropNulls);
  if (!isObj(v)) return v;
  return Object.fromEntries(Object.entries(v).filter(([, x]) => x !== null).map(([k, x]) => [k, dropNulls(x)]));
}
