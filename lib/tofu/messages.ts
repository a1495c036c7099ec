import { Redactor } from './redact.ts';

/** The `-json` UI stream of plan/apply/refresh: one object per line (see anchors §3.4). */

export type TofuLevel = 'info' | 'warn' | 'error' | 'trace' | 'debug';

export interface ResourceAddr {
  addr: string;
  module: string;
  resource: string;
  implied_provider: string;
  resource_type: string;
  resource_name: string;
  resource_key?: string | number | null;
}

export type ChangeAction = 'noop' | 'create' | 'read' | 'update' | 'replace' | 'delete' | 'move' | 'forget' | 'import';

export interface BaseMessage {
  '@level': TofuLevel;
  '@message': string;
  '@module': string;
  '@timestamp': string;
  type: string;
}

export interface VersionMessage extends BaseMessage {
  type: 'version';
  terraform?: string;
  tofu?: string;
  ui: string;
}
export interface LogMessage extends BaseMessage {
  type: 'log';
}
export interface Diagnostic {
  severity: 'error' | 'warning';
  summary: string;
  detail: string;
  address?: string;
  range?: { filename: string; start: { line: number; column: number; byte: number }; end: { line: number; column: number; byte: number } };
  snippet?: unknown;
}
export interface DiagnosticMessage extends BaseMessage {
  type: 'diagnostic';
  diagnostic: Diagnostic;
}
export interface ResourceChange {
  resource: ResourceAddr;
  previous_resource?: ResourceAddr;
  action: ChangeAction;
  reason?: string;
}
export interface PlannedChangeMessage extends BaseMessage {
  type: 'planned_change' | 'resource_drift';
  change: ResourceChange;
}
export interface ChangeSummaryMessage extends BaseMessage {
  type: 'change_summary';
  changes: { add: number; change: number; import?: number; remove: number; forget?: number; operation: 'plan' | 'apply' | 'destroy' };
}
export interface HookMessage extends BaseMessage {
  type:
    | 'apply_start'
    | 'apply_progress'
    | 'apply_complete'
    | 'apply_errored'
    | 'refresh_start'
    | 'refresh_complete'
    | 'provision_start'
    | 'provision_progress'
    | 'provision_complete'
    | 'provision_errored';
  hook: {
    resource: ResourceAddr;
    action?: ChangeAction;
    id_key?: string;
    id_value?: string;
    elapsed_seconds?: number;
    provisioner?: string;
    output?: string;
  };
}
export interface OutputsMessage extends BaseMessage {
  type: 'outputs';
  outputs: Record<string, { sensitive: boolean; type?: unknown; value?: unknown; action?: string }>;
}
/** Types this code does not know yet: kept, shown by `@message`. */
export interface UnknownMessage extends BaseMessage {
  [key: string]: unknown;
}

export type TofuMessage =
  | VersionMessage
  | LogMessage
  | DiagnosticMessage
  | PlannedChangeMessage
  | ChangeSummaryMessage
  | HookMessage
  | OutputsMessage
  | UnknownMessage;

const HOOK_TYPES = new Set<string>([
  'apply_start',
  'apply_progress',
  'apply_complete',
  'apply_errored',
  'refresh_start',
  'refresh_complete',
  'provision_start',
  'provision_progress',
  'provision_complete',
  'provision_errored',
]);

export const SUPPORTED_UI_MAJOR = 1;

export class UnsupportedUiVersionError extends Error {
  constructor(readonly ui: string) {
    super(`tofu speaks machine-readable UI version ${ui}; only major version ${SUPPORTED_UI_MAJOR} is understood`);
    this.name = 'UnsupportedUiVersionError';
  }
}

/**
 * Parses one stdout line. Returns undefined for a line that is not a UI message (tofu prints
 * some plain text even with -json); throws UnsupportedUiVersionError on a `version` message
 * whose major `ui` version is not ours, since the rest of the stream cannot be trusted then.
 */
export function parseTofuLine(line: string): TofuMessage | undefined {
  const t = line.trim();
  if (!t.startsWith('{')) return undefined;
  let obj: unknown;
  try {
    obj = JSON.parse(t);
  } catch {
    return undefined;
  }
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return undefined;
  const m = obj as Record<string, unknown>;
  if (typeof m.type !== 'string') return undefined;
  if (typeof m['@message'] !== 'string') m['@message'] = '';
  if (typeof m['@level'] !== 'string') m['@level'] = 'info';
  if (m.type === 'version') {
    const ui = typeof m.ui === 'string' ? m.ui : '';
    const major = Number.parseInt(ui.split('.')[0] ?? '', 10);
    if (major !== SUPPORTED_UI_MAJOR) throw new UnsupportedUiVersionError(ui || '(missing)');
  }
  return m as unknown as TofuMessage;
}

export function isPlannedChange(m: TofuMessage): m is PlannedChangeMessage {
  return (m.type === 'planned_change' || m.type === 'resource_drift') && typeof (m as PlannedChangeMessage).change === 'object';
}
export function isChangeSummary(m: TofuMessage): m is ChangeSummaryMessage {
  return m.type === 'change_summary' && typeof (m as ChangeSummaryMessage).changes === 'object';
}
export function isHook(m: TofuMessage): m is HookMessage {
  return HOOK_TYPES.has(m.type) && typeof (m as HookMessage).hook === 'object';
}
export function isDiagnostic(m: TofuMessage): m is DiagnosticMessage {
  return m.type === 'diagnostic' && typeof (m as DiagnosticMessage).diagnostic === 'object';
}
export function isOutputs(m: TofuMessage): m is OutputsMessage {
  return m.type === 'outputs' && typeof (m as OutputsMessage).outputs === 'object';
}
export function isVersion(m: TofuMessage): m is VersionMessage {
  return m.type === 'version';
}

export interface RunEvent {
  level: 'info' | 'warn' | 'error';
  type: string;
  message: string;
  data?: Record<string, unknown>;
}

export interface ToRunEventOptions {
  /** Strings that must never reach an event (credentials, machine configs, passwords). */
  secrets?: Iterable<string>;
  /** Reuse one redactor for a whole stream instead of building one per message. */
  redactor?: Redactor;
}

function level(m: TofuMessage): RunEvent['level'] {
  if (isDiagnostic(m)) return m.diagnostic.severity === 'error' ? 'error' : 'warn';
  const l = m['@level'];
  return l === 'error' ? 'error' : l === 'warn' ? 'warn' : 'info';
}

const MAX_DETAIL = 2000;

/**
 * A diagnostic's detail without what a provisioner printed (it may hold secrets), scrubbed, then
 * bounded: cut first, a secret across the cut would keep its first part past the scrubber.
 */
export function safeDetail(d: Diagnostic, scrub: (text: string) => string = (t) => t): string | undefined {
  if (typeof d.detail !== 'string') return undefined;
  let detail = d.detail;
  // Provisioner failures quote the script's output after "Output:"; that part may hold secrets.
  if (/provisioner/i.test(d.summary ?? '')) {
    const i = detail.indexOf('Output:');
    if (i >= 0) detail = `${detail.slice(0, i)}Output: (withheld)`;
  }
  detail = scrub(detail);
  return detail.length > MAX_DETAIL ? `${detail.slice(0, MAX_DETAIL)}…` : detail;
}

function compact(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

/**
 * Maps a UI message to a run event for the API and the dashboard. Only fields known to be safe
 * are copied: variable values, diagnostic snippets (they quote expression values), provisioner
 * output and sensitive output values are dropped, and every string is scrubbed of `secrets`.
 */
export function toRunEvent(m: TofuMessage, opts: ToRunEventOptions = {}): RunEvent {
  const r = opts.redactor ?? new Redactor(opts.secrets ?? []);
  const type = `tofu.${m.type}`;
  let message = m['@message'];
  let data: Record<string, unknown> | undefined;

  if (isVersion(m)) {
    data = { flavor: m.tofu !== undefined ? 'tofu' : 'terraform', version: m.tofu ?? m.terraform, ui: m.ui };
  } else if (isPlannedChange(m)) {
    data = compact({
      address: m.change.resource?.addr,
      previousAddress: m.change.previous_resource?.addr,
      action: m.change.action,
      reason: m.change.reason,
    });
  } else if (isChangeSummary(m)) {
    const c = m.changes;
    data = compact({ add: c.add, change: c.change, import: c.import, remove: c.remove, forget: c.forget, operation: c.operation });
  } else if (isHook(m)) {
    const h = m.hook;
    data = compact({
      address: h.resource?.addr,
      action: h.action,
      provisioner: h.provisioner,
      idKey: h.id_key,
      idValue: h.id_value,
      elapsedSeconds: h.elapsed_seconds,
    });
    if (m.type === 'provision_progress') {
      // Provisioner output is whatever a script prints, secrets included: never forwarded.
      message = `${h.resource?.addr ?? '?'}: (${h.provisioner ?? 'provisioner'}) output withheld`;
    }
  } else if (isDiagnostic(m)) {
    const d = m.diagnostic;
    data = compact({
      severity: d.severity,
      summary: d.summary,
      detail: safeDetail(d, (t) => r.text(t)),
      address: d.address,
      file: d.range?.filename,
      line: d.range?.start?.line,
    });
  } else if (isOutputs(m)) {
    const outputs: Record<string, unknown> = {};
    for (const [name, o] of Object.entries(m.outputs)) {
      outputs[name] = compact({
        sensitive: o.sensitive,
        action: o.action,
        value: o.sensitive ? undefined : o.value,
      });
    }
    data = { outputs };
  }

  const event: RunEvent = { level: level(m), type, message: r.text(message) };
  if (data) event.data = r.value(data);
  return event;
}
