/**
 * Scrubs known secret strings (credentials, machine configs) out of text before it becomes a
 * run event. Secrets are also matched in the encodings tofu may print them in.
 */
export const REDACTED = '[redacted]';

/** Shorter strings would scrub ordinary words out of messages. */
const MIN_SECRET_LENGTH = 6;
/** Lines of a multi-line secret (a machine config) that are long enough to be worth hiding alone. */
const MIN_LINE_LENGTH = 20;

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The inside of a JSON string as JavaScript writes it. */
const jsJson = (s: string): string => JSON.stringify(s).slice(1, -1);

/**
 * The inside of a JSON string as Go's encoding/json writes it (tofu's `-json` stream, provider
 * errors): like JavaScript (since Go 1.22 also for backspace and form feed), but HTML-safe, with
 * `<`, `>` and `&` escaped, and U+2028 and U+2029 too. None of these occurs in an escape
 * sequence, so they are replaced in JavaScript's output.
 */
const goJson = (s: string): string => jsJson(s).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

export function secretVariants(secret: string): string[] {
  const out = new Set<string>([secret]);
  out.add(Buffer.from(secret, 'utf8').toString('base64'));
  // Once and twice (a JSON document inside a JSON string, as a diagnostic quotes a value), by
  // either writer.
  const jsonEscaped = jsJson(secret);
  out.add(jsonEscaped);
  out.add(goJson(secret));
  out.add(jsJson(jsonEscaped));
  out.add(goJson(goJson(secret)));
  if (secret.includes('\n')) {
    for (const line of secret.split('\n')) {
      const t = line.trim();
      if (t.length >= MIN_LINE_LENGTH) out.add(t);
    }
  }
  return [...out].filter((s) => s.length >= MIN_SECRET_LENGTH);
}

export class Redactor {
  private readonly pattern: RegExp | undefined;
  /** The first MIN_SECRET_LENGTH characters of every variant. */
  private readonly heads = new Set<string>();

  constructor(secrets: Iterable<string>) {
    const all = new Set<string>();
    for (const s of secrets) if (s && s.length >= MIN_SECRET_LENGTH) for (const v of secretVariants(s)) all.add(v);
    // Longest first so a secret is replaced whole before any of its lines.
    const sorted = [...all].sort((a, b) => b.length - a.length);
    this.pattern = sorted.length ? new RegExp(sorted.map(escapeRegExp).join('|'), 'g') : undefined;
    for (const v of all) this.heads.add(v.slice(0, MIN_SECRET_LENGTH));
  }

  text(s: string): string {
    return this.pattern && this.mayContainSecret(s) ? s.replace(this.pattern, REDACTED) : s;
  }

  /**
   * Whether some variant's head occurs in `s`: every occurrence of a variant starts with one.
   * The alternation of whole machine configs costs far more per character than this look-up, and
   * nearly every line tofu prints holds no secret at all.
   */
  private mayContainSecret(s: string): boolean {
    for (let i = 0; i + MIN_SECRET_LENGTH <= s.length; i++) {
      if (this.heads.has(s.slice(i, i + MIN_SECRET_LENGTH))) return true;
    }
    return false;
  }

  /** Deep copy of a JSON-like value with every string scrubbed. */
  value<T>(v: T): T {
    if (typeof v === 'string') return this.text(v) as T;
    if (Array.isArray(v)) return v.map((x) => this.value(x)) as T;
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[this.text(k)] = this.value(x);
      return out as T;
    }
    return v;
  }
}
