// Kubernetes resource quantities ("250m", "123456n", "1024Ki", "2Gi", "1e3") as plain numbers.
// The grammar is the apiserver's: a signed decimal, then a binary suffix, a decimal SI suffix
// or an exponent. CPU comes out in cores and memory in bytes simply because those are the units
// the unsuffixed quantities use.

const BINARY: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL: Record<string, number> = { n: 1e-9, u: 1e-6, 'µ': 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };

const QUANTITY = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|µ|m|k|M|G|T|P|E))?$/;

export function parseQuantity(text: string): number {
  const m = QUANTITY.exec(text.trim());
  if (!m) throw new RangeError(`not a Kubernetes quantity: ${JSON.stringify(text)}`);
  const base = Number(m[1]);
  if (m[2]) return Number(`${m[1]}${m[2]}`);
  const suffix = m[3] ?? '';
  return base * (BINARY[suffix] ?? DECIMAL[suffix] ?? 1);
}

/** CPU quantity in cores, e.g. "250m" → 0.25, "123456n" → 0.000123456. */
export const parseCpuCores = (q: string): number => parseQuantity(q);

/** Memory quantity in bytes, e.g. "1024Ki" → 1048576. Rounded: bytes are whole. */
export const parseMemoryBytes = (q: string): number => Math.round(parseQuantity(q));
