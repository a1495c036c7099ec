// Where an object of a given apiVersion and kind lives in the API, read from the server's own
// discovery documents (as client-go's RESTMapper does): the resource's plural name and whether it
// is namespaced are the server's facts, not a table kept here, so custom resources map too.
import { getIfExists, type KubeWriter } from './drain.ts';
import type { ObjectRef } from './object-ref.ts';

export interface ResourceMapping {
  /** `apps/v1`, `v1`. */
  apiVersion: string;
  kind: string;
  /** The plural name in paths: `deployments`. */
  resource: string;
  namespaced: boolean;
}

export interface RestMapper {
  /** undefined: the server does not serve this kind at this apiVersion. */
  mapping(apiVersion: string, kind: string): Promise<ResourceMapping | undefined>;
  /** The same at the group's preferred version, for a ref that carries no version (an inventory entry). */
  mappingOf(ref: Pick<ObjectRef, 'group' | 'kind'>): Promise<ResourceMapping | undefined>;
  /** Forgets what was read, after an apply may have added kinds (a CustomResourceDefinition). */
  reset(): void;
}

interface ApiResource {
  name?: string;
  kind?: string;
  namespaced?: boolean;
}

/** The object's path: `/apis/apps/v1/namespaces/kube-system/deployments/coredns`. */
export function objectPath(m: ResourceMapping, namespace: string, name: string): string {
  const base = m.apiVersion.includes('/') ? `/apis/${m.apiVersion}` : `/api/${m.apiVersion}`;
  const scope = m.namespaced ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `${base}${scope}/${m.resource}/${encodeURIComponent(name)}`;
}

export function restMapper(w: KubeWriter, signal: AbortSignal): RestMapper {
  let versions = new Map<string, Promise<Map<string, ResourceMapping> | undefined>>();
  let preferred: Promise<Map<string, string>> | undefined;

  const read = (path: string): Promise<unknown> => getIfExists(w, path, signal);

  function kindsOf(apiVersion: string): Promise<Map<string, ResourceMapping> | undefined> {
    let p = versions.get(apiVersion);
    if (!p) {
      p = read(apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`).then((body) => {
        if (body === undefined) return undefined;
        const kinds = new Map<string, ResourceMapping>();
        for (const r of (body as { resources?: ApiResource[] }).resources ?? []) {
          // Subresources (`pods/eviction`) share their parent's kind; only the parent is where objects live.
          if (!r.name || !r.kind || r.name.includes('/')) continue;
          kinds.set(r.kind, { apiVersion, kind: r.kind, resource: r.name, namespaced: r.namespaced === true });
        }
        return kinds;
      });
      // A failed read is not remembered: the next lookup asks again.
      p.catch(() => versions.delete(apiVersion));
      versions.set(apiVersion, p);
    }
    return p;
  }

  function preferredVersions(): Promise<Map<string, string>> {
    preferred ??= read('/apis').then((body) => {
      const map = new Map<string, string>([['', 'v1']]);
      for (const g of (body as { groups?: Array<{ name?: string; preferredVersion?: { groupVersion?: string } }> } | undefined)?.groups ?? []) {
        if (g.name && g.preferredVersion?.groupVersion) map.set(g.name, g.preferredVersion.groupVersion);
      }
      return map;
    });
    preferred.catch(() => (preferred = undefined));
    return preferred;
  }

  return {
    async mapping(apiVersion, kind) {
      return (await kindsOf(apiVersion))?.get(kind);
    },
    async mappingOf(ref) {
      const apiVersion = (await preferredVersions()).get(ref.group);
      return apiVersion ? (await kindsOf(apiVersion))?.get(ref.kind) : undefined;
    },
    reset() {
      versions = new Map();
      preferred = undefined;
    },
  };
}
