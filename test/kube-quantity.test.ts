import { describe, expect, it } from 'vitest';
import { parseCpuCores, parseMemoryBytes, parseQuantity } from '../lib/kube/quantity.ts';
import { parseReadyzFailing } from '../lib/kube/collect.ts';

describe('Kubernetes quantities', () => {
  it.each([
    ['250m', 0.25],
    ['2', 2],
    ['1.5', 1.5],
    ['123456n', 0.000123456],
    ['500u', 0.0005],
    ['100k', 100_000],
    ['3M', 3_000_000],
    ['1G', 1e9],
    ['1e3', 1000],
    ['12E-1', 1.2],
    ['2E', 2e18],
    ['.5', 0.5],
  ])('CPU %s → %d cores', (q, cores) => {
    expect(parseCpuCores(q)).toBeCloseTo(cores, 12);
  });

  it.each([
    ['1024Ki', 1024 * 1024],
    ['2Gi', 2 * 2 ** 30],
    ['512Mi', 512 * 2 ** 20],
    ['1Ti', 2 ** 40],
    ['1500', 1500],
    ['8G', 8e9],
    ['1.5Gi', 1.5 * 2 ** 30],
  ])('memory %s → %d bytes', (q, bytes) => {
    expect(parseMemoryBytes(q)).toBe(bytes);
  });

  it.each(['', 'abc', '1Xi', '1.2.3', 'm', '--1', '1 Gi'])('rejects %j', (q) => {
    expect(() => parseQuantity(q)).toThrow(RangeError);
  });
});

describe('readyz verbose parsing', () => {
  it('names only the failing checks', () => {
    const body = '[+]ping ok\n[-]etcd failed: reason withheld\n[+]log ok\n[-]poststarthook/rbac/bootstrap-roles failed: not finished\nreadyz check failed\n';
    expect(parseReadyzFailing(body)).toEqual(['etcd', 'poststarthook/rbac/bootstrap-roles']);
  });
});
