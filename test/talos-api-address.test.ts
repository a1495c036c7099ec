import { describe, expect, it } from 'vitest';
import { formatNodeAddress, grpcTarget, InvalidNodeAddressError, parseNodeAddress } from '../lib/talos/api/address.ts';
import { InvalidFingerprintError, parseFingerprint } from '../lib/talos/api/fingerprint.ts';

describe('parseNodeAddress', () => {
  it.each([
    ['2001:db8::10', { host: '2001:db8::10', port: 50000 }],
    ['[2001:db8::10]:50123', { host: '2001:db8::10', port: 50123 }],
    ['[2001:db8::10]', { host: '2001:db8::10', port: 50000 }],
    ['192.0.2.5', { host: '192.0.2.5', port: 50000 }],
    ['192.0.2.5:50123', { host: '192.0.2.5', port: 50123 }],
    ['node-1.example.net', { host: 'node-1.example.net', port: 50000 }],
    ['Node-1.Example.net:443', { host: 'node-1.example.net', port: 443 }],
    ['  192.0.2.5  ', { host: '192.0.2.5', port: 50000 }],
  ])('parses %s', (input, expected) => {
    expect(parseNodeAddress(input)).toEqual(expected);
  });

  it.each([
    '',
    '   ',
    '192.0.2.5:',
    '192.0.2.5:0',
    '192.0.2.5:65536',
    '192.0.2.5:abc',
    '300.1.2.3',
    '1.2.3',
    '2001:db8::10:50000:zz',
    '[2001:db8::10',
    '[192.0.2.5]:50000',
    '[2001:db8::10]50000',
    'https://192.0.2.5',
    'user@host',
    'host name',
    '-bad.example',
    'a..b',
  ])('rejects %j with a clear error', (input) => {
    expect(() => parseNodeAddress(input)).toThrow(InvalidNodeAddressError);
  });

  it('quotes the bad input in the message', () => {
    expect(() => parseNodeAddress('192.0.2.5:99999')).toThrow(/"192\.0\.2\.5:99999".*port out of range/);
  });

  it('builds the grpc target with IPv6 bracketed', () => {
    expect(grpcTarget('2001:db8::10')).toBe('[2001:db8::10]:50000');
    expect(grpcTarget('[2001:db8::10]:50123')).toBe('[2001:db8::10]:50123');
    expect(grpcTarget('192.0.2.5')).toBe('192.0.2.5:50000');
    expect(formatNodeAddress({ host: 'cp1.example', port: 50001 })).toBe('cp1.example:50001');
  });
});

describe('parseFingerprint', () => {
  const digest = Buffer.alloc(32, 0xab);
  it('accepts base64 as Talos prints it, and hex with or without colons in any case', () => {
    for (const form of [
      digest.toString('base64'),
      digest.toString('hex'),
      digest.toString('hex').toUpperCase(),
      digest.toString('hex').match(/../g)!.join(':'),
      digest.toString('hex').toUpperCase().match(/../g)!.join(':'),
    ]) {
      expect(parseFingerprint(form).digest.equals(digest)).toBe(true);
    }
  });

  it.each(['', 'abcd', 'zz'.repeat(32), 'ab:cd'.repeat(10), Buffer.alloc(16).toString('base64')])('rejects %j', (bad) => {
    expect(() => parseFingerprint(bad)).toThrow(InvalidFingerprintError);
  });
});
