import type { Json } from './api.ts';

/** Reading a run for people: who started it, how long it took, what changed, where it failed. */

export const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'interrupted']);

export function startedBy(createdBy: unknown): string {
  if (createdBy === null || createdBy === undefined) return 'schedule';
  if (createdBy === 'env-admin') return 'admin token';
  if (createdBy === 'ha-ingress') return 'Home Assistant';
  return `token ${String(createdBy)}`;
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return '—';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** From start (or creation) to finish, or to `now` while it runs. */
export function runDuration(run: Json, now: number): number | null {
  const from = run.startedAt ?? null;
  if (from === null) return null;
  return (run.finishedAt ?? now) - from;
}

export interface PlannedResource {
  address: string;
  action: string;
}

export type DiffGroup = 'add' | 'change' | 'replace' | 'destroy';

const GROUP_OF: Record<string, DiffGroup | undefined> = { create: 'add', update: 'change', replace: 'replace', delete: 'destroy' };

/** A plan's resources grouped as Terraform shows them; reads and no-ops are left out. */
export function planDiff(run: Json, events: Json[]): { summary: Json | null; groups: Record<DiffGroup, string[]> } | null {
  const fromResult: unknown = run.result?.resources;
  let resources: PlannedResource[] = Array.isArray(fromResult) ? (fromResult as PlannedResource[]) : [];
  if (!resources.length) {
    resources = events
      .filter((e) => e.type === 'tofu.planned_change' && typeof e.data?.address === 'string')
      .map((e) => ({ address: String(e.data.address), action: String(e.data.action) }));
  }
  const summary = run.result?.summary ?? events.findLast((e) => e.type === 'provision.planned')?.data ?? null;
  if (run.kind !== 'provision' || (!resources.length && !summary)) return null;
  const groups: Record<DiffGroup, string[]> = { add: [], change: [], replace: [], destroy: [] };
  for (const r of resources) {
    const g = GROUP_OF[r.action];
    if (g && !groups[g].includes(r.address)) groups[g].push(r.address);
  }
  return { summary, groups };
}

export interface Diagnostic {
  summary: string;
  detail?: string;
  address?: string;
}

/** What tofu said was wrong, rather than the name of the step that failed. */
export function diagnostics(events: Json[]): Diagnostic[] {
  return events
    .filter((e) => e.type === 'tofu.diagnostic' && e.data?.severity === 'error')
    .map((e) => ({
      summary: String(e.data.summary ?? e.message),
      ...(typeof e.data.detail === 'string' && e.data.detail ? { detail: e.data.detail } : {}),
      ...(typeof e.data.address === 'string' ? { address: e.data.address } : {}),
    }));
}

export interface NodeProgress {
  node: string;
  role?: string;
  step: string;
  elapsedMs?: number;
  level: string;
  done: boolean;
}

const FINAL_STEP = /^(done|skip|ready|applied|succeeded|complete)/;

/** Per node, the latest step a push or upgrade reported and how long that node has taken. */
export function nodeProgress(run: Json, events: Json[]): NodeProgress[] {
  if (!['upgrade', 'push-config', 'bootstrap'].includes(String(run.kind))) return [];
  const byNode = new Map<string, NodeProgress>();
  for (const e of events) {
    const node = e.data?.node ?? e.data?.machineName;
    if (typeof node !== 'string' || !node) continue;
    const prev = byNode.get(node);
    const step = String(e.data.phase ?? e.data.step ?? String(e.type).split('.').slice(1).join('.'));
    const elapsed = typeof e.data.elapsedMs === 'number' ? e.data.elapsedMs : prev?.elapsedMs;
    byNode.set(node, {
      node,
      ...(typeof e.data.role === 'string' ? { role: e.data.role } : prev?.role ? { role: prev.role } : {}),
      step,
      ...(elapsed !== undefined ? { elapsedMs: elapsed } : {}),
      level: e.level === 'error' ? 'error' : (prev?.level === 'error' ? 'error' : e.level),
      done: FINAL_STEP.test(step),
    });
  }
  return [...byNode.values()];
}

/** The one-line error of a failed run, in words; tofu's own diagnostics replace "terraform <step>". */
export function runErrorText(run: Json, events: Json[]): string | null {
  if (!run.error) return null;
  const d = diagnostics(events);
  if (d.length) return d.map((x) => x.summary).join('; ');
  return String(run.error);
}

/** 23456 as "23,456": the same on the server and in the page script, whatever the locale. */
export function formatCount(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}
