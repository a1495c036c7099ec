const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** `1536` → `1.5 KiB`: powers of 1024, a decimal only below 10 of a unit. */
export function formatBytes(v: number): string {
  let i = 0;
  let x = Math.abs(v);
  while (x >= 1024 && i < BYTE_UNITS.length - 1) {
    x /= 1024;
    i++;
  }
  return `${(Math.sign(v) * x).toFixed(x >= 10 || i === 0 ? 0 : 1)} ${BYTE_UNITS[i]}`;
}
