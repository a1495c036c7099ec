import { obj, str, type Raw } from './convert.ts';
import type { CosiResource } from './types.ts';

function stringMap(v: unknown): Record<string, string> {
  const m = obj(v);
  if (!m) return {};
  return Object.fromEntries(Object.entries(m).map(([k, x]) => [k, str(x)]));
}

/**
 * A `cosi.resource.Resource` as the client returns it; null when the message carries no metadata,
 * which no node sends for a resource that exists (it is what a corrupted or foreign reply looks like).
 */
export function toCosiResource(resource: unknown): CosiResource | null {
  const r = obj(resource);
  const md = obj(r?.['metadata']);
  if (!r || !md) return null;
  const spec: Raw = obj(r['spec']) ?? {};
  return {
    id: str(md['id']),
    namespace: str(md['namespace']),
    type: str(md['type']),
    version: str(md['version']),
    phase: str(md['phase']),
    owner: str(md['owner']),
    labels: stringMap(md['labels']),
    yamlSpec: str(spec['yaml_spec']),
  };
}
