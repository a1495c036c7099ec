import { createHash } from 'node:crypto';
import type { ClusterSecrets } from '../../../lib/talos/secrets.ts';
import { machineConfigInput, renderOrReject } from '../../../functions/machine-config/render.ts';
import type { ConfigDocument } from '../../../lib/talos/patch.ts';

type Cluster = Parameters<typeof renderOrReject>[0];
type Machine = Parameters<typeof renderOrReject>[1];

/** Bounded: about 11 kB a config, so a few megabytes at most. */
const MAX_ENTRIES = 512;

// Rendering a machine config (schema checks of the secrets' certificates, patches, YAML) costs
// milliseconds a machine; a cluster of twenty re-renders the same twenty configs on every run,
// and rendering is a pure function of its input. Keyed by a digest of that whole input, so any
// change (settings, patches, secrets, versions) is a miss, never a stale hit. The configs hold
// cluster secrets, as this process's memory already does while it runs; nothing goes to disk.
const cache = new Map<string, string>();

const digest = (s: string) => createHash('sha256').update(s).digest('base64url');

/** A renderer for one run: the secrets are digested once, not once per machine. */
export function configRenderer(cluster: Cluster, secrets: ClusterSecrets): (machine: Machine, extraDocuments?: ConfigDocument[]) => string {
  const secretsDigest = digest(JSON.stringify(secrets));
  return (machine, extraDocuments = []) => {
    const key = `${secretsDigest}.${digest(JSON.stringify({ ...machineConfigInput(cluster, machine, secrets, extraDocuments), secrets: null }))}`;
    const hit = cache.get(key);
    if (hit !== undefined) {
      // Re-inserted: the Map's order is then least recently used first.
      cache.delete(key);
      cache.set(key, hit);
      return hit;
    }
    const rendered = renderOrReject(cluster, machine, secrets, 'patches', extraDocuments);
    cache.set(key, rendered);
    if (cache.size > MAX_ENTRIES) cache.delete(cache.keys().next().value!);
    return rendered;
  };
}
