// Just enough of the Dockerfile grammar to check what an image build reads from its context:
// instructions with their continuation lines joined, comment lines dropped, flags split off.

export interface Instruction {
  keyword: string;
  /** The text after the keyword, continuation lines joined with a space. */
  args: string;
  line: number;
}

export function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending: { start: number; parts: string[] } | undefined;
  text.split('\n').forEach((raw, i) => {
    const line = raw.replace(/\r$/, '');
    const trimmed = line.trim();
    // Comment lines are removed before continuations are joined, as Docker does.
    if (trimmed.startsWith('#') || (trimmed === '' && !pending)) return;
    const continues = /\\\s*$/.test(line);
    const body = continues ? line.replace(/\\\s*$/, '') : line;
    if (!pending) pending = { start: i + 1, parts: [] };
    pending.parts.push(body.trim());
    if (continues) return;
    const joined = pending.parts.filter(Boolean).join(' ');
    const m = /^(\S+)\s*(.*)$/.exec(joined);
    if (m) out.push({ keyword: m[1]!.toUpperCase(), args: m[2]!, line: pending.start });
    pending = undefined;
  });
  return out;
}

export interface CopySpec {
  keyword: 'COPY' | 'ADD';
  from?: string;
  sources: string[];
  dest: string;
  line: number;
}

/** COPY/ADD with their --flags, in shell form or JSON-array form. */
export function copySpecs(instructions: Instruction[]): CopySpec[] {
  return instructions
    .filter((i): i is Instruction & { keyword: 'COPY' | 'ADD' } => i.keyword === 'COPY' || i.keyword === 'ADD')
    .map((i) => {
      let rest = i.args.trim();
      let from: string | undefined;
      for (let flag = /^--([a-z-]+)(?:=(\S*))?\s+/.exec(rest); flag; flag = /^--([a-z-]+)(?:=(\S*))?\s+/.exec(rest)) {
        if (flag[1] === 'from') from = flag[2];
        rest = rest.slice(flag[0].length);
      }
      const words: string[] = rest.startsWith('[') ? (JSON.parse(rest) as string[]) : rest.split(/\s+/);
      return { keyword: i.keyword, from, sources: words.slice(0, -1), dest: words.at(-1) ?? '', line: i.line };
    });
}

export interface Stage {
  /** The FROM image with global ARG defaults substituted. */
  image: string;
  name?: string;
  instructions: Instruction[];
}

/** Splits the file into build stages and resolves `FROM ${ARG}` against the ARGs before the first FROM. */
export function stages(instructions: Instruction[]): Stage[] {
  const globals = new Map<string, string>();
  const out: Stage[] = [];
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$/i.exec(ins.args);
      if (!m) throw new Error(`line ${ins.line}: cannot read FROM ${ins.args}`);
      const image = m[1]!.replace(/\$\{?(\w+)\}?/g, (_, name: string) => globals.get(name) ?? '');
      out.push({ image, name: m[2], instructions: [] });
    } else if (out.length === 0) {
      if (ins.keyword === 'ARG') {
        const [name, value = ''] = ins.args.split('=', 2);
        globals.set(name!.trim(), value.trim());
      }
    } else {
      out.at(-1)!.instructions.push(ins);
    }
  }
  return out;
}

/** Each `apt-get install` / `apt install` command of a RUN, split at shell command separators. */
export function aptInstalls(instructions: Instruction[]): { command: string; line: number }[] {
  return instructions
    .filter((i) => i.keyword === 'RUN')
    .flatMap((i) =>
      i.args
        .split(/&&|\|\||;|\|/)
        .map((c) => c.trim())
        .filter((c) => /\bapt(?:-get)?\s+(?:-\S+\s+)*install\b/.test(c))
        .map((command) => ({ command, line: i.line })),
    );
}
