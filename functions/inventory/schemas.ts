import { z } from 'zod';
import { DNS_LABEL } from '../../lib/talos/validate.ts';

/** Names become hostnames, tofu keys and directory names, so they must be DNS labels. */
export const dnsLabel = z
  .string()
  .min(1, 'must not be empty')
  .max(63, 'must be at most 63 characters')
  .regex(DNS_LABEL, 'must be a DNS label: lowercase letters, digits and "-", not starting or ending with "-"');

export const idParam = z.string().regex(/^[a-z]+_[a-z2-7]{16}$/, 'is not a valid id');
