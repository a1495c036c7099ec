/** Line charts with axes, drawn as SVG on the server: no script, nothing for the CSP to allow. */

import { formatBytes } from '../../lib/bytes.ts';

export type Unit = 'bytes' | 'ratio' | 'plain';

export interface ChartSeries {
  /** [epoch ms, value], oldest first. */
  points: ReadonlyArray<readonly [number, number]>;
  unit: Unit;
  title: string;
  /** The window shown, so a sparse series still sits at its real time. */
  from: number;
  to: number;
}

const W = 640;
const H = 220;
const M = { left: 88, right: 20, top: 16, bottom: 34 };

const esc = (s: string) => s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!);
const r2 = (n: number) => Math.round(n * 100) / 100;

export function formatValue(v: number, unit: Unit): string {
  if (unit === 'ratio') return `${(v * 100).toFixed(v < 0.1 ? 1 : 0)} %`;
  if (unit === 'bytes') return formatBytes(v);
  return Math.abs(v) >= 100 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(2);
}

/** Round tick values covering [min, max]: 1, 2 or 5 times a power of ten (of 1024 for bytes). */
export function niceTicks(min: number, max: number, unit: Unit, count = 4): number[] {
  if (max <= min) max = min + (min === 0 ? 1 : Math.abs(min));
  const base = unit === 'bytes' ? 1024 ** Math.max(0, Math.floor(Math.log(Math.max(max, 1)) / Math.log(1024))) : 1;
  const raw = (max - min) / base / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  // A byte is the smallest step a byte axis can take.
  const step = Math.max(unit === 'bytes' ? 1 : 0, ([1, 2, 5, 10].find((f) => f * mag >= raw) ?? 10) * mag * base);
  // Each tick from its index, so float error cannot pile up (0.6, not 0.6000000000000001).
  const first = Math.floor(min / step);
  const ticks: number[] = [];
  for (let i = first; ticks.length < 12; i++) {
    const t = Number((i * step).toPrecision(12));
    ticks.push(t);
    if (t >= max) break;
  }
  return ticks;
}

const pad2 = (n: number) => String(n).padStart(2, '0');
function timeLabel(ms: number, spanMs: number): string {
  const d = new Date(ms);
  const hm = `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}`;
  return spanMs > 36 * 3_600_000 ? `${pad2(d.getUTCDate())}.${pad2(d.getUTCMonth() + 1)}. ${hm}` : hm;
}

/** The chart as an SVG string; an empty series says so instead of drawing a flat line. */
export function renderChart(s: ChartSeries): string {
  const pts = s.points.filter(([t, v]) => Number.isFinite(t) && Number.isFinite(v));
  const values = pts.map(([, v]) => v);
  const latest = pts.at(-1)?.[1];
  const summary =
    latest === undefined
      ? `${s.title}: no samples in this window`
      : `${s.title}: latest ${formatValue(latest, s.unit)}, min ${formatValue(Math.min(...values), s.unit)}, max ${formatValue(Math.max(...values), s.unit)}`;
  const open = `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(summary)}"><title>${esc(summary)}</title>`;
  const iw = W - M.left - M.right;
  const ih = H - M.top - M.bottom;
  const lo = Math.min(0, ...values);
  const ticks = niceTicks(lo, values.length ? Math.max(...values) : s.unit === 'ratio' ? 1 : 1, s.unit);
  const yMin = ticks[0]!;
  const yMax = ticks.at(-1)!;
  const span = Math.max(1, s.to - s.from);
  const x = (t: number) => r2(M.left + ((t - s.from) / span) * iw);
  const y = (v: number) => r2(M.top + (1 - (v - yMin) / (yMax - yMin)) * ih);
  let out = open;
  // Without data a scale would be invented; only the zero line is drawn.
  for (const t of values.length ? ticks : [yMin]) {
    out += `<line class="grid" x1="${M.left}" x2="${W - M.right}" y1="${y(t)}" y2="${y(t)}"/>`;
    out += `<text class="tick" x="${M.left - 6}" y="${y(t) + 4}" text-anchor="end">${esc(formatValue(t, s.unit))}</text>`;
  }
  for (let i = 0; i <= 4; i++) {
    const t = s.from + (span * i) / 4;
    const anchor = i === 0 ? 'start' : i === 4 ? 'end' : 'middle';
    out += `<text class="tick" x="${x(t)}" y="${H - 10}" text-anchor="${anchor}">${esc(timeLabel(t, span))}</text>`;
  }
  out += `<line class="axis" x1="${M.left}" x2="${W - M.right}" y1="${y(yMin)}" y2="${y(yMin)}"/><line class="axis" x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${H - M.bottom}"/>`;
  if (pts.length === 0) {
    out += `<text class="empty" x="${M.left + iw / 2}" y="${M.top + ih / 2}" text-anchor="middle">no samples in this window</text>`;
  } else {
    out += `<polyline class="line" points="${pts.map(([t, v]) => `${x(t)},${y(v)}`).join(' ')}"/>`;
    const [lt, lv] = pts.at(-1)!;
    out += `<circle class="dot" cx="${x(lt)}" cy="${y(lv)}" r="3"/>`;
  }
  return `${out}</svg>`;
}
