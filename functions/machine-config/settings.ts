import { z } from 'zod';
import { DEFAULT_POD_SUBNETS, DEFAULT_SERVICE_SUBNETS, installDiskSchema, schematicSchema, subnetsSchema } from '../../lib/talos/validate.ts';
import { VANILLA_SCHEMATIC } from '../../lib/talos/installer.ts';

export const patchInput = z.union([z.string().max(256 * 1024), z.record(z.string(), z.unknown())]);
export const patchList = z.array(patchInput).max(32);

/** The Talos-specific part of a cluster, stored as its `settings` JSON. */
export interface ClusterTalosSettings {
  schematic: string;
  installerImage?: string;
  installDisk: string;
  podSubnets: string[];
  serviceSubnets: string[];
  patches: (string | Record<string, unknown>)[];
}

export const clusterTalosInput = z.object({
  schematic: schematicSchema.optional(),
  installerImage: z
    .string()
    .max(500)
    .regex(/^[a-z0-9.-]+(:\d+)?\/[a-z0-9._/-]+(:[\w.-]+)?(@sha256:[0-9a-f]{64})?$/, 'must be an image reference like factory.talos.dev/installer/<id>:v1.13.9')
    .optional(),
  installDisk: installDiskSchema.optional(),
  podSubnets: z.array(z.string()).optional(),
  serviceSubnets: z.array(z.string()).optional(),
  patches: patchList.optional(),
});

export function toClusterSettings(input: z.output<typeof clusterTalosInput>): ClusterTalosSettings | { error: z.ZodError } {
  const subnets = subnetsSchema.safeParse({
    podSubnets: input.podSubnets ?? DEFAULT_POD_SUBNETS,
    serviceSubnets: input.serviceSubnets ?? DEFAULT_SERVICE_SUBNETS,
  });
  if (!subnets.success) return { error: subnets.error };
  return {
    schematic: input.schematic ?? VANILLA_SCHEMATIC,
    ...(input.installerImage ? { installerImage: input.installerImage } : {}),
    installDisk: input.installDisk ?? '/dev/sda',
    podSubnets: subnets.data.podSubnets,
    serviceSubnets: subnets.data.serviceSubnets,
    patches: input.patches ?? [],
  };
}

export function readClusterSettings(settings: Record<string, unknown>): ClusterTalosSettings {
  return {
    schematic: (settings.schematic as string) ?? VANILLA_SCHEMATIC,
    ...(settings.installerImage ? { installerImage: settings.installerImage as string } : {}),
    installDisk: (settings.installDisk as string) ?? '/dev/sda',
    podSubnets: (settings.podSubnets as string[]) ?? DEFAULT_POD_SUBNETS,
    serviceSubnets: (settings.serviceSubnets as string[]) ?? DEFAULT_SERVICE_SUBNETS,
    patches: (settings.patches as ClusterTalosSettings['patches']) ?? [],
  };
}
