// What an apply changes in an object, apart from what the server keeps about it (resourceVersion,
// managedFields, status and the like): how a dry-run apply, whose answer never moves the
// resourceVersion, tells "configured" from "unchanged", and what a sync reports it changed.
import { isDeepStrictEqual } from 'node:util';

const SERVER_METADATA = ['resourceVersion', 'generation', 'managedFields', 'uid', 'creationTimestamp', 'selfLink'];

type Obj = Record<string, unknown>;

/** The object in its own key order (so changes are listed as the document reads), without what the server keeps. */
function content(obj: Obj): Obj {
  const out: Obj = {};
  for (const [k, v] of Object.entries(obj)) {
    if (k === 'status') continue;
    if (k !== 'metadata') out[k] = v;
    else {
      const meta = { ...(v as Obj | undefined) };
      for (const m of SERVER_METADATA) delete meta[m];
      out[k] = meta;
    }
  }
  out['metadata'] ??= {};
  return out;
}

export function sameContent(a: Obj, b: Obj): boolean {
  return isDeepStrictEqual(content(a), content(b));
}

/** One field an apply changed, added or removed. */
export interface FieldChange {
  /** Where it is, as `spec.template.spec.containers[0].image` (keys that are not plain names in ["…"]). */
  path: string;
  /** The values before and after, for container images only ("" for none). */
  from?: string;
  to?: string;
}

/**
 * Only a container's image shows its values: any other field may hold a secret (a Secret's data,
 * an env value, a kubectl last-applied annotation, whatever an inline manifest carries), so the
 * rest is reported by path alone. An image reference names public content.
 */
const IMAGE_PATH = /(^|\.)(containers|initContainers|ephemeralContainers)\[\d+\]\.image$/;

const isPlainObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const keyPath = (base: string, key: string): string => (/^[A-Za-z_$][\w$-]*$/.test(key) ? (base ? `${base}.${key}` : key) : `${base}[${JSON.stringify(key)}]`);

/**
 * The leaves in which `after` differs from `before`, in document order, at most `limit` of them
 * (`more` counts the rest). Objects are compared key by key and lists of the same length item by
 * item; a list whose length changed is one change at its own path.
 */
export function changedFields(before: Obj, after: Obj, limit = 50): { fields: FieldChange[]; more: number } {
  const fields: FieldChange[] = [];
  let more = 0;
  const leaf = (path: string, a: unknown, b: unknown): void => {
    if (fields.length >= limit) {
      more++;
      return;
    }
    const shown = IMAGE_PATH.test(path) && (a === undefined || typeof a === 'string') && (b === undefined || typeof b === 'string');
    fields.push(shown ? { path, from: (a as string | undefined) ?? '', to: (b as string | undefined) ?? '' } : { path });
  };
  const walk = (path: string, a: unknown, b: unknown): void => {
    if (isDeepStrictEqual(a, b)) return;
    // A map added or removed whole is walked too, so what it holds is named leaf by leaf.
    if ((isPlainObject(a) || a === undefined) && (isPlainObject(b) || b === undefined)) {
      const [x, y] = [a ?? {}, b ?? {}];
      for (const k of new Set([...Object.keys(x), ...Object.keys(y)])) walk(keyPath(path, k), x[k], y[k]);
    } else if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
      const list: unknown[] = b;
      a.forEach((item, i) => walk(`${path}[${i}]`, item, list[i]));
    } else leaf(path, a, b);
  };
  walk('', content(before), content(after));
  return { fields, more };
}

/** A change list for a run event's message: its first few paths (with images' values), then how many more. */
export function describeFields({ fields, more }: { fields: FieldChange[]; more: number }, shown = 3): string {
  const named = fields.slice(0, shown).map((f) => (f.from !== undefined ? `${f.path} ${f.from || '(none)'} → ${f.to || '(none)'}` : f.path));
  const rest = fields.length - named.length + more;
  return named.join(', ') + (rest > 0 ? ` and ${rest} more` : '');
}
