const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

/** Prefixed random ids (`cl_…`, `run_…`): readable in logs, 80 bits of randomness. */
export function newId(prefix: string): string {
  // Web Crypto rather than node:crypto, so the ids can be minted in a Worker too.
  const bytes = crypto.getRandomValues(new Uint8Array(10));
  let bits = 0;
  let value = 0;
  let out = '';
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return `${prefix}_${out}`;
}
