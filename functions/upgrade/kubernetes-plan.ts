// Pure decisions of a Kubernetes upgrade: the config a node gets at each step, and what its config
// carries at the new version once that step was applied (lib/talos/k8s-images.ts knows where).
import { parseAllDocuments } from 'yaml';
import { stringifyDocuments } from '../../lib/talos/config.ts';
import { componentImage, K8S_COMPONENTS, takeComponentImages, type K8sComponent } from '../../lib/talos/k8s-images.ts';
import type { ConfigDocument } from '../../lib/talos/patch.ts';

/**
 * A machine config's documents (a render, or what a node runs). An error names the position only:
 * the YAML library's message quotes the source line, which may hold key material.
 */
export function parseDocuments(yaml: string): ConfigDocument[] {
  return parseAllDocuments(yaml).map((d) => {
    const first = d.errors[0];
    if (first) throw new Error(`the config does not parse (${first.code} at line ${first.linePos?.[0].line ?? '?'})`);
    return d.toJS() as ConfigDocument;
  });
}

/** The image a rendered config gives `component`; undefined where the role has none (a worker's static pods). */
export function configImage(yaml: string, component: K8sComponent): string | undefined {
  return componentImage(parseDocuments(yaml), component);
}

/**
 * The config a node gets when `upTo` moves: the config rendered at the new version, with the
 * images of every component after `upTo` kept as the old render has them. Both renders carry the
 * cluster's and machine's patches, so a patched image (a mirror registry) stays patched.
 */
export function stepConfig(oldYaml: string, newYaml: string, upTo: K8sComponent): string {
  const oldDocs = parseDocuments(oldYaml);
  const docs = parseDocuments(newYaml);
  takeComponentImages(docs, K8S_COMPONENTS.slice(K8S_COMPONENTS.indexOf(upTo) + 1), oldDocs);
  return stringifyDocuments(docs);
}

/**
 * What a machine's config carries away from the cluster's version once the step of `upTo` is
 * applied to it: every component up to `upTo` at `version`, the later ones as before.
 */
export function componentsAfterStep(before: Readonly<Record<string, string>> | null, upTo: K8sComponent, version: string): Record<string, string> {
  const after: Record<string, string> = { ...before };
  for (const c of K8S_COMPONENTS.slice(0, K8S_COMPONENTS.indexOf(upTo) + 1)) after[c] = version;
  return after;
}
