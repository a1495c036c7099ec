import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const PROTO_ROOT = fileURLToPath(new URL('./protos', import.meta.url));

const PROTO_FILES = ['machine/machine.proto', 'machine/image.proto', 'machine/lifecycle.proto'];

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

export interface TalosServiceDefinitions {
  machine: grpc.ServiceDefinition;
  image: grpc.ServiceDefinition;
  lifecycle: grpc.ServiceDefinition;
  MachineServiceClient: grpc.ServiceClientConstructor;
  ImageServiceClient: grpc.ServiceClientConstructor;
  LifecycleServiceClient: grpc.ServiceClientConstructor;
  packageDefinition: protoLoader.PackageDefinition;
}

let cached: TalosServiceDefinitions | undefined;

/** Loads the Talos protos once per process (parsing them costs a few milliseconds). */
export function loadTalosServices(): TalosServiceDefinitions {
  if (cached) return cached;
  const packageDefinition = protoLoader.loadSync(PROTO_FILES, PROTO_LOADER_OPTIONS);
  const loaded = grpc.loadPackageDefinition(packageDefinition);
  const machinePkg = loaded['machine'] as grpc.GrpcObject;
  const ctor = (name: string): grpc.ServiceClientConstructor => {
    const c = machinePkg[name];
    if (typeof c !== 'function') throw new Error(`proto service machine.${name} missing`);
    return c as grpc.ServiceClientConstructor;
  };
  const MachineServiceClient = ctor('MachineService');
  const ImageServiceClient = ctor('ImageService');
  const LifecycleServiceClient = ctor('LifecycleService');
  cached = {
    machine: MachineServiceClient.service,
    image: ImageServiceClient.service,
    lifecycle: LifecycleServiceClient.service,
    MachineServiceClient,
    ImageServiceClient,
    LifecycleServiceClient,
    packageDefinition,
  };
  return cached;
}
