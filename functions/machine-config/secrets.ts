import type { ClusterSecrets } from '../../lib/talos/secrets.ts';
import { parseSecrets } from '../../lib/talos/secrets.ts';
import { DomainError } from '../../lib/errors.ts';
import type { Deps } from '../context.ts';
import type { ClusterRow } from '../inventory/load.ts';

const context = (clusterId: string) => `cluster:${clusterId}:secrets`;

export function sealClusterSecrets(deps: Pick<Deps, 'sealer'>, clusterId: string, secrets: ClusterSecrets): string {
  return deps.sealer.seal(JSON.stringify(secrets), context(clusterId));
}

export function openClusterSecrets(deps: Pick<Deps, 'sealer'>, cluster: Pick<ClusterRow, 'id' | 'secretsSealed'>): ClusterSecrets {
  if (!cluster.secretsSealed) throw new DomainError('conflict', 'no_secrets', 'cluster has no secrets');
  return parseSecrets(JSON.parse(deps.sealer.openText(cluster.secretsSealed, context(cluster.id))));
}
