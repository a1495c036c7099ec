/** Names of the failing checks in a /readyz?verbose body ("[-]etcd failed: reason withheld"). */
export function parseReadyzFailing(text: string): string[] {
  const failing: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\[-\]\s*(\S+)/.exec(line.trim());
    if (m?.[1]) failing.push(m[1]);
  }
  return failing;
}
