/**
 * Nesting limits for untrusted input. Parsers, validators and merge code recurse; a body nested
 * hundreds of levels deep would otherwise overflow the stack (a 500) instead of being refused.
 */
export const MAX_NESTING = 64;

/**
 * Deepest `{`/`[` nesting in JSON or flow-YAML text, counting only brackets outside double-quoted
 * strings. A scan, no recursion, so it is safe on any input.
 */
export function textNesting(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 92 /* \ */) i++;
      else if (ch === 34 /* " */) inString = false;
      continue;
    }
    if (ch === 34) inString = true;
    else if (ch === 123 || ch === 91) {
      if (++depth > max) max = depth;
    } else if (ch === 125 || ch === 93) depth = Math.max(0, depth - 1);
  }
  return max;
}

/** Whether a parsed value nests objects/arrays deeper than `max` (iterative). */
export function nestsDeeperThan(value: unknown, max = MAX_NESTING): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d + 1 > max) return true;
    for (const x of Object.values(v as Record<string, unknown>)) if (x !== null && typeof x === 'object') stack.push([x, d + 1]);
  }
  return false;
}
