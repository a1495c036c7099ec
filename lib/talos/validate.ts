// zod schemas for Talos-related inputs at the HTTP edge. Messages never echo the value.
import { z } from 'zod';
import { isSchematicId } from './installer.ts';
import { canonicalIp, cidrsOverlap, parseCidr, parseIp } from './net.ts';
import type { ParsedCidr } from './net.ts';
import { normalizeKubernetesVersion, normalizeTalosVersion, parseVersion } from './versions.ts';

export const talosVersionSchema = z
  .string()
  .refine((v) => parseVersion(v) !== undefined, { message: 'must look like v1.13.9 or v1.14.0-rc.1' })
  .transform((v) => normalizeTalosVersion(v));

export const kubernetesVersionSchema = z
  .string()
  .refine((v) => parseVersion(v) !== undefined, { message: 'must look like 1.36.3' })
  .transform((v) => normalizeKubernetesVersion(v));

const DNS_NAME = /^(?=.{1,253}$)([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/;

export function isDnsName(value: string): boolean {
  return DNS_NAME.test(value) && !/^[0-9.]+$/.test(value);
}

const ENDPOINT = /^https:\/\/(\[[0-9A-Fa-f:.]+\]|[^/:?#@[\]\s]+):(\d{1,5})\/?$/;

export interface EndpointParts {
  /** host as written in a URL (IPv6 in brackets) */
  urlHost: string;
  /** host for certificates: IPv6 without brackets, canonical form */
  host: string;
  port: number;
  isIp: boolean;
}

export function parseEndpoint(value: string): EndpointParts | undefined {
  const match = ENDPOINT.exec(value);
  if (!match) return undefined;
  const rawHost = match[1] as string;
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return undefined;
  if (rawHost.startsWith('[')) {
    const ip = parseIp(rawHost.slice(1, -1));
    if (!ip || ip.family !== 6) return undefined;
    const host = canonicalIp(rawHost.slice(1, -1)) as string;
    return { urlHost: `[${host}]`, host, port, isIp: true };
  }
  const ip = parseIp(rawHost);
  if (ip) return ip.family === 4 ? { urlHost: rawHost, host: rawHost, port, isIp: true } : undefined;
  if (!isDnsName(rawHost)) return undefined;
  const host = rawHost.toLowerCase();
  return { urlHost: host, host, port, isIp: false };
}

/** `https://host:port`, host a DNS name, IPv4 or bracketed IPv6; normalised (lower case, canonical IPv6, no trailing slash). */
export const endpointSchema = z
  .string()
  .refine((v) => parseEndpoint(v) !== undefined, { message: 'must be https://host:port (IPv6 as [addr])' })
  .transform((v) => {
    const parts = parseEndpoint(v) as EndpointParts;
    return `https://${parts.urlHost}:${parts.port}`;
  });

export const installDiskSchema = z
  .string()
  .regex(/^\/[^\s\0]*$/, 'must be an absolute device path such as /dev/sda')
  .max(255, 'must be at most 255 characters')
  .refine((v) => !v.split('/').includes('..'), { message: 'must not contain ".."' })
  .refine((v) => v.length > 1 && !v.endsWith('/'), { message: 'must name a device, not a directory' });

export const hostnameSchema = z
  .string()
  .max(253, 'must be at most 253 characters')
  .refine(isDnsName, { message: 'must be a DNS name (letters, digits, hyphens, dots)' })
  .transform((v) => v.toLowerCase());

/** An RFC 1123 label in lower case: what cluster and machine names must be. */
export const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export const clusterNameSchema = z.string().regex(DNS_LABEL, 'must be 1-63 lowercase letters, digits or hyphens');

/** An address a machine is reached at: IPv4, IPv6 (canonicalised) or a DNS name. */
export const machineAddressSchema = z
  .string()
  .refine((v) => parseIp(v) !== undefined || isDnsName(v), { message: 'must be an IP address or DNS name' })
  .transform((v) => canonicalIp(v) ?? v.toLowerCase());

export const schematicSchema = z.string().refine(isSchematicId, { message: 'must be a 64-character hex schematic id' });

const cidrSchema = z.string().superRefine((v, ctx) => {
  const parsed = parseCidr(v);
  if (!parsed) ctx.addIssue({ code: 'custom', message: 'must be a CIDR such as 10.244.0.0/16 or fd00::/64' });
  else if (parsed.hostBitsSet) ctx.addIssue({ code: 'custom', message: 'has host bits set; use the network address' });
});

const subnetList = z
  .array(cidrSchema)
  .min(1, 'must list at least one subnet')
  .max(2, 'must list at most two subnets (one IPv4, one IPv6)')
  .superRefine((list, ctx) => {
    const families = list.map((c) => parseCidr(c)?.family);
    if (families.length === 2 && families[0] === families[1]) {
      ctx.addIssue({ code: 'custom', message: 'must not list two subnets of the same IP family' });
    }
  });

export const DEFAULT_POD_SUBNETS = ['10.244.0.0/16'];
export const DEFAULT_SERVICE_SUBNETS = ['10.96.0.0/12'];

/** Pod and service subnets (dual-stack allowed); the two sets must not overlap. */
export const subnetsSchema = z
  .strictObject({
    podSubnets: subnetList.default(DEFAULT_POD_SUBNETS),
    serviceSubnets: subnetList.default(DEFAULT_SERVICE_SUBNETS),
  })
  .superRefine((value, ctx) => {
    const pods = value.podSubnets.map((c) => parseCidr(c)).filter((c): c is ParsedCidr => c !== undefined);
    value.serviceSubnets.forEach((text, index) => {
      const service = parseCidr(text);
      if (service && pods.some((pod) => cidrsOverlap(pod, service))) {
        ctx.addIssue({ code: 'custom', path: ['serviceSubnets', index], message: 'overlaps a pod subnet' });
      }
    });
  });

export interface FieldIssue {
  path: string;
  message: string;
}

export function zodIssues(error: z.ZodError, prefix = ''): FieldIssue[] {
  return error.issues.map((issue) => ({
    path: [prefix, ...issue.path.map(String)].filter((p) => p !== '').join('.') || '(root)',
    message: issue.message,
  }));
}

export function formatIssues(issues: FieldIssue[]): string {
  return issues.map((i) => `${i.path}: ${i.message}`).join('; ');
}
