/**
 * What a simulated node's `cosi.resource.State` answers besides the resources themselves: Talos's
 * access policy in front of the state (internal/app/resources/access.go) and COSI's wire shapes
 * (cosi-project/runtime pkg/state/protobuf/server, pkg/resource/protobuf).
 */
import * as grpc from '@grpc/grpc-js';
import type { SimCosiResource } from './manifests.ts';
import { SIM_MANIFEST_TYPE } from './manifests.ts';

/** The namespaces machined registers at start (runtime/v1alpha2/v1alpha2_state.go), whatever the config. */
const NAMESPACES: ReadonlySet<string> = new Set([
  'meta', 'runtime', 'cluster', 'cluster-raw', 'config', 'etcd', 'files', 'hardware', 'k8s', 'controlplane',
  'kubespan', 'network', 'network-config', 'cri', 'containers', 'secrets', 'security', 'perf', 'storage',
]);

/**
 * The resource types the sim serves. A real node defines many more: the sim refuses the others as
 * a node refuses a type it has no definition of, so a test meaning a real type finds out at once.
 * Manifests sets no sensitivity; MachineConfigs (the config the node runs) is Sensitive.
 */
const TYPES: ReadonlySet<string> = new Set([SIM_MANIFEST_TYPE.toLowerCase(), 'machineconfigs.config.talos.dev']);

/** Types whose definition is Sensitive: only os:admin reads them (access.go). */
const SENSITIVE: ReadonlySet<string> = new Set(['machineconfigs.config.talos.dev']);

/**
 * Why Talos's access policy refuses a read of (namespace, type), or undefined. It looks the type
 * definition up by the lowercased type (definition ids are), then the namespace; both refusals are
 * PERMISSION_DENIED with these messages.
 */
export function cosiReadRefusal(namespace: string, type: string, admin: boolean): { code: grpc.status; message: string } | undefined {
  if (!TYPES.has(type.toLowerCase())) return { code: grpc.status.PERMISSION_DENIED, message: `resource type ${JSON.stringify(type)} is not supported` };
  if (SENSITIVE.has(type.toLowerCase()) && !admin) return { code: grpc.status.PERMISSION_DENIED, message: 'not authorized' };
  if (!NAMESPACES.has(namespace)) return { code: grpc.status.PERMISSION_DENIED, message: `namespace ${JSON.stringify(namespace)} is not supported` };
  return undefined;
}

const timestamp = (d: Date): Record<string, unknown> => ({ seconds: String(Math.floor(d.getTime() / 1000)), nanos: (d.getTime() % 1000) * 1e6 });

/** A `cosi.resource.Resource`: the YAML spec filled in as the runtime marshals it; no proto spec (the sim has no Go types). */
export function toProtoResource(r: SimCosiResource): Record<string, unknown> {
  return {
    metadata: {
      namespace: r.namespace,
      type: r.type,
      id: r.id,
      version: String(r.version),
      owner: r.owner,
      phase: r.phase,
      created: timestamp(r.created),
      updated: timestamp(r.updated),
      finalizers: [],
      labels: {},
      annotations: {},
    },
    spec: { yaml_spec: r.yamlSpec },
  };
}
