// The bootstrap manifests a Talos control plane renders from its config (kube-proxy, CoreDNS, the
// CNI, RBAC, the bootstrap token, inline manifests), read as `talosctl upgrade-k8s` reads them
// (go-kubernetes manifests.GetBootstrapManifests): the COSI resources of one type and namespace,
// each a list of Kubernetes objects.
import { parse, YAMLError } from 'yaml';
import type { CosiResource } from './api/types.ts';

/** k8s.ControlPlaneNamespaceName (pkg/machinery/resources/k8s). */
export const MANIFESTS_NAMESPACE = 'controlplane';
/** k8s.ManifestType (pkg/machinery/resources/k8s/manifest.go). */
export const MANIFEST_TYPE = 'Manifests.kubernetes.talos.dev';

export interface BootstrapManifestObject {
  /** The Talos manifest (resource id) the object came from, e.g. `10-kube-proxy`, `99-<inline name>`. */
  manifest: string;
  object: Record<string, unknown>;
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const nonEmpty = (v: unknown): v is string => typeof v === 'string' && v !== '';

/**
 * Why an item is no Kubernetes object, or undefined if it is one. Names the first missing field
 * only: the item itself is never quoted, since the manifests carry the bootstrap token Secret.
 */
function objectProblem(item: unknown): string | undefined {
  if (!isRecord(item)) return 'is not a mapping';
  if (!nonEmpty(item['apiVersion'])) return 'has no apiVersion';
  if (!nonEmpty(item['kind'])) return 'has no kind';
  const md = item['metadata'];
  if (!isRecord(md) || !nonEmpty(md['name'])) return `(${item['kind']}) has no metadata.name`;
  return undefined;
}

function parseSpec(r: CosiResource): unknown {
  try {
    // Warnings would be printed with the lines they concern: only errors, and those are rewritten.
    return parse(r.yamlSpec, { logLevel: 'error' });
  } catch (err) {
    // The parser's message quotes the offending lines, which may be the token's: code and position
    // only, and no cause either, since whoever logs the error may print the cause's message too.
    if (err instanceof YAMLError) {
      const at = err.linePos?.[0];
      // eslint-disable-next-line preserve-caught-error
      throw new Error(`bootstrap manifest ${JSON.stringify(r.id)}: spec is not valid YAML (${err.code}${at ? ` at line ${at.line}, column ${at.col}` : ''})`);
    }
    throw err;
  }
}

/**
 * The Kubernetes objects of the listed Manifest resources, each tagged with its manifest, in the
 * order of the resources (a node lists them by id, the order Talos applies them in) and of the
 * objects inside each. The spec's YAML is the bare list of objects (ManifestSpec.MarshalYAML).
 * Throws an Error naming the manifest when a spec is not such a list.
 */
export function bootstrapManifestObjects(resources: CosiResource[]): BootstrapManifestObject[] {
  const out: BootstrapManifestObject[] = [];
  for (const r of resources) {
    const items = parseSpec(r);
    if (!Array.isArray(items)) {
      const found = items === null ? 'empty' : isRecord(items) ? 'a mapping' : typeof items;
      throw new Error(`bootstrap manifest ${JSON.stringify(r.id)}: spec is not a list of objects (${found})`);
    }
    items.forEach((item: unknown, i) => {
      const problem = objectProblem(item);
      if (problem) throw new Error(`bootstrap manifest ${JSON.stringify(r.id)}: item ${i} ${problem}`);
      out.push({ manifest: r.id, object: item as Record<string, unknown> });
    });
  }
  return out;
}
