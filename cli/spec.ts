import { parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { endpointSchema, kubernetesVersionSchema, talosVersionSchema } from '../lib/talos/validate.ts';
import type { Cluster, Machine, Patch, Tenant } from './api-types.ts';
import { usageError } from './exit.ts';

export const API_VERSION = 'rezus.cloud/v1';
export const KIND = 'Cluster';

const name = z.string().regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'must be a DNS label (lowercase letters, digits, "-")');
const patch = z.union([z.string(), z.record(z.string(), z.unknown())]);

// Only the shape is checked here; the API validates values (CIDRs, schematic ids, patches against
// the Talos schema) and its message is shown as is. Values the API normalises are normalised
// here the same way, so a file that says `v1.36.3` does not differ forever from the stored `1.36.3`.
const machineSpec = z.strictObject({
  name,
  role: z.enum(['controlplane', 'worker']),
  provider: z.string().min(1),
  address: z.string().nullable().optional(),
  installDisk: z.string().nullable().optional(),
  patches: z.array(patch).optional(),
});

export const clusterDocument = z.strictObject({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(KIND),
  metadata: z.strictObject({ name, tenant: z.string().min(1) }),
  spec: z.strictObject({
    endpoint: endpointSchema,
    talosVersion: talosVersionSchema.optional(),
    kubernetesVersion: kubernetesVersionSchema.optional(),
    schematic: z.string().optional(),
    installerImage: z.string().nullable().optional(),
    installDisk: z.string().optional(),
    podSubnets: z.array(z.string()).optional(),
    serviceSubnets: z.array(z.string()).optional(),
    patches: z.array(patch).optional(),
    providerSettings: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
    machines: z
      .array(machineSpec)
      .default([])
      .refine((ms) => new Set(ms.map((m) => m.name)).size === ms.length, 'machine names must be unique'),
  }),
});

export type ClusterDocument = z.output<typeof clusterDocument>;
export type MachineSpec = z.output<typeof machineSpec>;

/** Parses every YAML document in a file (`---`-separated) as a cluster spec; errors name the document and path. */
export function parseSpecFile(text: string, source: string): ClusterDocument[] {
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs)) throw usageError(`${source}: empty`);
  const out: ClusterDocument[] = [];
  docs.forEach((doc, i) => {
    const where = docs.length > 1 ? `${source} (document ${i + 1})` : source;
    if (doc.errors.length) throw usageError(`${where}: ${doc.errors[0]!.message}`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) return;
    const parsed = clusterDocument.safeParse(value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw usageError(`${where}: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
    }
    out.push(parsed.data);
  });
  if (out.length === 0) throw usageError(`${source}: no cluster spec in it`);
  return out;
}

/** The spec that describes a cluster as it is now: `apply -f` of it changes nothing. */
export function exportSpec(tenant: Tenant, cluster: Cluster, machines: Machine[]) {
  const s = cluster.settings;
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: cluster.name, tenant: tenant.name },
    spec: {
      endpoint: cluster.endpoint,
      talosVersion: cluster.talosVersion,
      kubernetesVersion: cluster.kubernetesVersion,
      ...(s.schematic !== undefined ? { schematic: s.schematic } : {}),
      ...(s.installerImage ? { installerImage: s.installerImage } : {}),
      ...(s.installDisk !== undefined ? { installDisk: s.installDisk } : {}),
      ...(s.podSubnets ? { podSubnets: s.podSubnets } : {}),
      ...(s.serviceSubnets ? { serviceSubnets: s.serviceSubnets } : {}),
      patches: s.patches ?? [],
      providerSettings: s.providerSettings ?? {},
      machines: [...machines]
        .sort((a, b) => a.name.localeCompare(b.name))
        .map((m) => ({
          name: m.name,
          role: m.role,
          provider: m.provider,
          ...(m.address !== null ? { address: m.address } : {}),
          ...(m.installDisk !== null ? { installDisk: m.installDisk } : {}),
          ...(m.patches.length ? { patches: m.patches } : {}),
        })),
    },
  };
}

export type { Patch };
