import { z } from 'zod';

const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Names become hostnames, tofu keys and directory names, so they must be DNS labels. */
export const dnsLabel = z
  .string()
  .min(1, 'must not be empty')
  .max(63, 'must be at most 63 characters')
  .regex(DNS_LABEL, 'must be a DNS label: lowercase letters, digits and "-", not starting or ending with "-"');

export const idParam = z.string().regex(/^[a-z]+_[a-z2-7]{16}$/, 'is not a valid id');
