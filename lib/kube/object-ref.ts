// Which object a manifest names, apart from its contents, and the inventory key it is kept under.
// The key is cli-utils' (`namespace_name_group_kind`, colons in RBAC names written `__`): the
// inventory ConfigMap Talos and talosctl keep (go-kubernetes' ssa package) uses it, so an
// inventory written here and one written by `talosctl upgrade-k8s` read the same.

export interface ObjectRef {
  /** `''` for the core group. */
  group: string;
  kind: string;
  /** `''` for a cluster-scoped object. */
  namespace: string;
  name: string;
}

/** A Kubernetes object as a manifest gives it: only what every object has is typed. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

const SEP = '_';
const COLON = '__';

/** `apps/v1` → `apps`; `v1` → `''`. */
export const groupOf = (apiVersion: string): string => (apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '');

export function refOf(o: KubeObject): ObjectRef {
  return { group: groupOf(o.apiVersion), kind: o.kind, namespace: o.metadata.namespace ?? '', name: o.metadata.name };
}

export function refKey(r: ObjectRef): string {
  return [r.namespace, r.name.replaceAll(':', COLON), r.group, r.kind].join(SEP);
}

/** The inverse of refKey; undefined for a key that is not one (a hand-edited inventory). */
export function parseRefKey(key: string): ObjectRef | undefined {
  const first = key.indexOf(SEP);
  const last = key.lastIndexOf(SEP);
  if (first < 0 || last <= first) return undefined;
  const kind = key.slice(last + 1);
  const rest = key.slice(first + 1, last);
  const groupAt = rest.lastIndexOf(SEP);
  if (groupAt < 0 || kind === '') return undefined;
  const name = rest.slice(0, groupAt).replaceAll(COLON, ':');
  if (name === '' || name.includes(SEP)) return undefined;
  return { namespace: key.slice(0, first), name, group: rest.slice(groupAt + 1), kind };
}

/** `Deployment kube-system/coredns`, `ClusterRole system:coredns`, for messages. */
export function describeRef(r: ObjectRef): string {
  const kind = r.group ? `${r.kind}.${r.group}` : r.kind;
  return `${kind} ${r.namespace ? `${r.namespace}/` : ''}${r.name}`;
}

export const sameRef = (a: ObjectRef, b: ObjectRef): boolean => a.group === b.group && a.kind === b.kind && a.namespace === b.namespace && a.name === b.name;
