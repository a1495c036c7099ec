import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { buildMachineDocuments } from '../lib/talos/config.ts';
import { stringifyConfigDocument, writtenDirectly, YAML_OPTIONS } from '../lib/talos/config-yaml.ts';
import { nodeWireguardDocument } from '../lib/mesh/talos-doc.ts';
import { sharedSecrets } from './support/harness.ts';
import { seededRandom } from './support/seeded-random.ts';

// Strings that sit on every boundary of `yaml`'s plain/quoted choice, plus ones the direct writer
// leaves to `yaml` (newlines, quotes, non-ASCII, control characters).
const STRINGS = [
  '', ' ', 'a', 'true', 'True', 'TRUE', 'false', 'yes', 'no', 'on', 'off', 'null', 'Null', 'NULL', '~', '-', '?', ':', '#',
  '0', '12', '-3', '+4', '007', '0o17', '0o8', '0x1f', '0xg', '1.0', '.5', '-.5', '1.', '1e3', '1E-3', '.inf', '-.Inf', '.nan', '.NaN', '1_000',
  'a: b', 'a:b', 'a :b', 'a:', 'a #b', 'a#b', '#a', '- a', '-a', '? a', '?a', ':a', 'a ', ' a', 'a,b', ',a', '[a', ']a', '{a', '}a', 'a]', 'a{}',
  '&a', '*a', '!a', '|a', '>a', "'a", '"a', '%a', '@a', '`a', '=', '<<', '---', '--- a', '...', '..', '-- a', 'a---',
  "it's", 'say "hi"', 'back\\slash', 'line\nbreak', 'trailing\n', '\n', 'tab\there', 'é', 'ünïcode', '\u0007', '\u00a0', '\u2028',
  '2001:db8::1', '[2001:db8::1]:6443', 'https://[2001:db8::1]:6443', '10.244.0.0/16', '/dev/sda', 'ghcr.io/siderolabs/kubelet:v1.33.1',
  'node.kubernetes.io/exclude-from-external-load-balancers', 'LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJ', 'abc+/=', 'x'.repeat(1100),
];
const NUMBERS = [0, 1, -1, 7445, 65535, 2 ** 40, -0, 1.5, 1e21, Number.NaN, Number.POSITIVE_INFINITY];

function tree(r: () => number, depth: number): unknown {
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const roll = r();
  if (depth <= 0 || roll < 0.45) {
    const k = r();
    if (k < 0.7) return pick(STRINGS);
    if (k < 0.85) return pick(NUMBERS);
    if (k < 0.95) return r() < 0.5;
    return null;
  }
  if (roll < 0.7) {
    const n = Math.floor(r() * 4);
    return Array.from({ length: n }, () => tree(r, depth - 1));
  }
  const obj: Record<string, unknown> = {};
  const n = Math.floor(r() * 5);
  for (let i = 0; i < n; i++) obj[r() < 0.8 ? pick(STRINGS.filter((s) => s.length < 50)) : `k${i}`] = tree(r, depth - 1);
  return obj;
}

describe('config YAML writer', () => {
  it('writes the same bytes as yaml for trees around every quoting rule', () => {
    const r = seededRandom(20261203);
    let direct = 0;
    for (let i = 0; i < 4000; i++) {
      const doc = { root: tree(r, 5), [STRINGS[i % STRINGS.length]!]: tree(r, 3) };
      const expected = stringify(doc, YAML_OPTIONS);
      expect(stringifyConfigDocument(doc), JSON.stringify(doc)).toBe(expected);
      if (writtenDirectly(doc)) direct++;
    }
    // The comparison means something only if many trees took the direct path.
    expect(direct).toBeGreaterThan(500);
  });

  it('writes every single string and number the same as yaml, as key, value and item', () => {
    for (const s of [...STRINGS, ...NUMBERS, true, false, null]) {
      for (const doc of [{ v: s }, { list: [s, s] }, { items: [{ a: s, b: [s], c: { d: s } }] }, ...(typeof s === 'string' ? [{ [s]: 1 }] : [])]) {
        expect(stringifyConfigDocument(doc), JSON.stringify(doc)).toBe(stringify(doc, YAML_OPTIONS));
      }
    }
  });

  it('leaves to yaml what it cannot write the same way', () => {
    expect(writtenDirectly({ a: 'line\nbreak' })).toBe(false);
    expect(writtenDirectly({ a: 1.5 })).toBe(false);
    expect(writtenDirectly({ a: [[1]] })).toBe(false);
    expect(writtenDirectly({ a: [{}] })).toBe(false);
    expect(writtenDirectly({ a: undefined })).toBe(false);
    expect(writtenDirectly({ a: new Date(0) })).toBe(false);
    expect(writtenDirectly({})).toBe(false);
    for (const doc of [{ a: 'line\nbreak' }, { a: [[1]] }, { a: new Date(0) }, { a: undefined, b: 1 }, {}]) {
      expect(stringifyConfigDocument(doc)).toBe(stringify(doc, YAML_OPTIONS));
    }
  });

  it('writes generated machine configs directly, as yaml would', async () => {
    const secrets = await sharedSecrets();
    for (const role of ['controlplane', 'worker'] as const) {
      const docs = buildMachineDocuments({
        secrets,
        clusterName: 'yaml',
        endpoint: 'https://[2001:db8::1]:6443',
        role,
        hostname: 'node-1',
        installDisk: '/dev/sda',
        addresses: ['2001:db8::10', '192.0.2.1'],
        machinePatches: [{ machine: { sysctls: { 'net.core.somaxconn': '1024' }, nodeLabels: { zone: 'a', 'x/y': 'true' } } }],
        extraDocuments: [
          nodeWireguardDocument({
            privateKey: 'aGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd28=', ipv4: '100.64.0.2', ipv6: 'fd00::2', ipv4PrefixLength: 10, ipv6PrefixLength: 64,
            hubPublicKey: 'd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGU=', hubIpv4: '100.64.0.1', hubIpv6: 'fd00::1', endpoint: '[2001:db8::1]:51820',
          }),
        ],
      });
      for (const doc of docs) {
        expect(writtenDirectly(doc)).toBe(true);
        expect(stringifyConfigDocument(doc)).toBe(stringify(doc, YAML_OPTIONS));
      }
    }
  });
});
