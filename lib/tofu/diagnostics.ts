// Why a tofu command failed, in tofu's own words: the summary and detail of its error
// diagnostics, from the -json stream or, for `init` (plain text), from the text on stderr.
import type { Diagnostic } from './messages.ts';
import { safeDetail } from './messages.ts';
import type { Redactor } from './redact.ts';

export interface DiagnosticText {
  summary: string;
  detail: string;
}

const MAX_LINE = 1000;

/** `summary: detail` on one line, scrubbed; details are wrapped prose, so newlines become spaces. */
export function describeDiagnostic(d: DiagnosticText, redactor: Redactor): string {
  const detail = d.detail.replace(/\s+/g, ' ').trim();
  const text = detail ? `${d.summary.trim()}: ${detail}` : d.summary.trim();
  const scrubbed = redactor.text(text);
  return scrubbed.length > MAX_LINE ? `${scrubbed.slice(0, MAX_LINE)}…` : scrubbed;
}

export function fromStream(d: Diagnostic): DiagnosticText {
  return { summary: String(d.summary ?? ''), detail: safeDetail(d) ?? '' };
}

// -no-color output: "Error: <summary>", a blank line, the detail; with colour, the same inside a
// "│ " box, which is stripped too.
// Escaped (│ ╷ ╵): one non-ASCII character in a bundled chunk makes V8 keep all its source as UTF-16.
const BOX = /^[\u2502\u2577\u2575]\s?/;

/** The error diagnostics tofu printed as text (stderr of `init`, or of anything run without -json). */
export function fromText(text: string): DiagnosticText[] {
  const out: DiagnosticText[] = [];
  let current: { summary: string; lines: string[] } | undefined;
  const flush = (): void => {
    if (current) out.push({ summary: current.summary, detail: current.lines.join('\n').trim() });
    current = undefined;
  };
  for (const raw of text.split('\n')) {
    const line = raw.replace(BOX, '');
    const error = /^Error: (.*)$/.exec(line);
    if (error) {
      flush();
      current = { summary: error[1]!, lines: [] };
    } else if (/^Warning: /.test(line)) {
      flush();
    } else if (current) {
      current.lines.push(line);
    }
  }
  flush();
  return out;
}
