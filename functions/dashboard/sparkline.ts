export interface SparklineOptions {
  width?: number;
  height?: number;
  /** What the numbers are, read out by screen readers, e.g. "CPU load". */
  label: string;
  /** Only the newest this many values are drawn. */
  maxPoints?: number;
  /** Formats a value for the accessible summary. */
  format?: (v: number) => string;
}

const PAD = 2;

const escapeXml = (s: string) =>
  s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!);

const round = (n: number) => Math.round(n * 100) / 100;

const defaultFormat = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(2));

/** Plot coordinates of the values: oldest at the left, the largest value at the top. */
export function sparklinePoints(values: readonly number[], width: number, height: number): Array<[number, number]> {
  const ys = values.filter((v) => Number.isFinite(v));
  if (ys.length === 0) return [];
  const min = Math.min(...ys);
  const max = Math.max(...ys);
  const span = max - min;
  const innerW = width - 2 * PAD;
  const innerH = height - 2 * PAD;
  return ys.map((v, i) => {
    const x = ys.length === 1 ? width / 2 : PAD + (i * innerW) / (ys.length - 1);
    // A flat series sits in the middle rather than on an edge, so it reads as "steady", not "zero".
    const y = span === 0 ? height / 2 : PAD + (1 - (v - min) / span) * innerH;
    return [round(x), round(y)];
  });
}

/** An inline SVG sparkline, rendered on the server: no script, no image request. */
export function renderSparkline(values: readonly number[], opts: SparklineOptions): string {
  const width = opts.width ?? 120;
  const height = opts.height ?? 28;
  const fmt = opts.format ?? defaultFormat;
  const finite = values.filter((v) => Number.isFinite(v)).slice(-(opts.maxPoints ?? 120));
  const label = escapeXml(opts.label);
  const open = `<svg class="sparkline" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img"`;
  if (finite.length === 0) {
    const summary = `${label}: no data`;
    return (
      `${open} aria-label="${summary}"><title>${summary}</title>` +
      `<line class="sparkline-empty" x1="${PAD}" y1="${height / 2}" x2="${width - PAD}" y2="${height / 2}" stroke="currentColor" stroke-dasharray="3 3" stroke-opacity="0.5"/></svg>`
    );
  }
  const pts = sparklinePoints(finite, width, height);
  const last = finite.at(-1)!;
  const summary = `${label}: latest ${escapeXml(fmt(last))}, min ${escapeXml(fmt(Math.min(...finite)))}, max ${escapeXml(fmt(Math.max(...finite)))}`;
  const [lx, ly] = pts.at(-1)!;
  return (
    `${open} aria-label="${summary}"><title>${summary}</title>` +
    `<polyline fill="none" stroke="currentColor" stroke-width="1.5" stroke-linejoin="round" stroke-linecap="round" points="${pts.map(([x, y]) => `${x},${y}`).join(' ')}"/>` +
    `<circle cx="${lx}" cy="${ly}" r="2" fill="currentColor"/></svg>`
  );
}
