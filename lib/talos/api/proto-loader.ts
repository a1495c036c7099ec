import { fileURLToPath } from 'node:url';
import * as protoLoader from '@grpc/proto-loader';

const PROTO_ROOT = fileURLToPath(new URL('./protos', import.meta.url));

const PROTO_FILES = ['machine/machine.proto', 'machine/image.proto', 'machine/lifecycle.proto', 'cosi/v1alpha1/state.proto'];

/**
 * keepCase keeps upstream snake_case names so the raw objects line up with the .proto text;
 * the client maps them to camelCase itself. longs: String because etcd member ids are full
 * uint64 values that a JS number would round.
 */
export const PROTO_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_ROOT],
};

/**
 * Replies of the monitoring reads a collect pass makes of every node, every pass. Their fields are
 * strings, doubles, bools and counters far below 2^53, and the client's converters default an
 * absent field themselves; decoding them without filling in defaults (a Long and a string per
 * unset 64-bit field) and with counters as numbers cuts the per-reply work severalfold. The etcd
 * replies keep the full decoding: member ids are uint64 values a number would round.
 */
const LEAN_REPLY_METHODS = ['Version', 'Hostname', 'ServiceList', 'Memory', 'LoadAvg', 'SystemStat', 'DiskStats', 'Mounts'] as const;

const LEAN_REPLY_OPTIONS: protoLoader.Options = { ...PROTO_LOADER_OPTIONS, longs: Number, defaults: false };

function useLeanReplies(def: protoLoader.PackageDefinition): void {
  const lean = protoLoader.loadSync(PROTO_FILES, LEAN_REPLY_OPTIONS)['machine.MachineService'] as protoLoader.ServiceDefinition;
  const full = def['machine.MachineService'] as protoLoader.ServiceDefinition;
  for (const name of LEAN_REPLY_METHODS) {
    const l = lean[name];
    const f = full[name];
    if (!l || !f) throw new Error(`proto method machine.MachineService/${name} missing`);
    full[name] = { ...f, responseDeserialize: l.responseDeserialize };
  }
}

export interface TalosServiceDefinitions {
  machine: protoLoader.ServiceDefinition;
  image: protoLoader.ServiceDefinition;
  lifecycle: protoLoader.ServiceDefinition;
  /** COSI `cosi.resource.State`: how Talos serves its resources (`talosctl get`). */
  cosiState: protoLoader.ServiceDefinition;
  packageDefinition: protoLoader.PackageDefinition;
}

let cached: TalosServiceDefinitions | undefined;

function service(def: protoLoader.PackageDefinition, fullName: string): protoLoader.ServiceDefinition {
  const s = def[fullName];
  if (!s || typeof (s as { format?: unknown }).format === 'string') throw new Error(`proto service ${fullName} missing`);
  return s as protoLoader.ServiceDefinition;
}

/** Loads the Talos protos once per process (parsing them costs a few milliseconds). */
export function loadTalosServices(): TalosServiceDefinitions {
  if (cached) return cached;
  const packageDefinition = protoLoader.loadSync(PROTO_FILES, PROTO_LOADER_OPTIONS);
  useLeanReplies(packageDefinition);
  cached = {
    machine: service(packageDefinition, 'machine.MachineService'),
    image: service(packageDefinition, 'machine.ImageService'),
    lifecycle: service(packageDefinition, 'machine.LifecycleService'),
    cosiState: service(packageDefinition, 'cosi.resource.State'),
    packageDefinition,
  };
  return cached;
}
