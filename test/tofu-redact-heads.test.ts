import { describe, expect, it } from 'vitest';
import { Redactor, REDACTED } from '../lib/tofu/redact.ts';

// The redactor skips its pattern for text in which no secret's first characters occur; these
// cases sit on the edges of that check.
describe('Redactor look-up before the pattern', () => {
  const config = 'machine:\n  token: abcdef.0123456789abcdef\n  ca:\n    crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n';
  const r = new Redactor(['s3cr3t-token', config]);

  it('scrubs a secret at the very start, at the very end and as the whole text', () => {
    expect(r.text('s3cr3t-token then words')).toBe(`${REDACTED} then words`);
    expect(r.text('words then s3cr3t-token')).toBe(`words then ${REDACTED}`);
    expect(r.text('s3cr3t-token')).toBe(REDACTED);
  });

  it('scrubs a line of a machine config, its JSON-escaped and its base64 form', () => {
    expect(r.text('error near "token: abcdef.0123456789abcdef" here')).toBe(`error near "${REDACTED}" here`);
    expect(r.text(`value ${JSON.stringify(config).slice(1, -1)}!`)).toBe(`value ${REDACTED}!`);
    expect(r.text(`b64 ${Buffer.from(config).toString('base64')}`)).toBe(`b64 ${REDACTED}`);
  });

  it('leaves text alone that holds only a prefix shorter than the look-up, or nothing', () => {
    expect(r.text('s3cr3')).toBe('s3cr3');
    expect(r.text('s3cr3t-tokn is not it')).toBe('s3cr3t-tokn is not it');
    expect(r.text('')).toBe('');
    expect(new Redactor([]).text('anything s3cr3t-token')).toBe('anything s3cr3t-token');
  });

  it('scrubs inside nested values too', () => {
    expect(r.value({ a: ['x s3cr3t-token y'], b: { 's3cr3t-token': 1 } })).toEqual({ a: [`x ${REDACTED} y`], b: { [REDACTED]: 1 } });
  });
});

describe('secrets in the forms Go writes them', () => {
  // A password with the characters Go's encoding/json escapes HTML-safe, and a quote.
  const secret = 'pa<ss>&"word-42';
  const r = new Redactor([secret]);

  it('scrubs it HTML-safe escaped, once and inside a JSON string, where JavaScript would write it otherwise', () => {
    const goOnce = 'pa\\u003css\\u003e\\u0026\\"word-42';
    expect(r.text(`{"@message":"Error: bad password ${goOnce} given"}`)).toBe(`{"@message":"Error: bad password ${REDACTED} given"}`);
    // tofu's diagnostic quoting a JSON value: the document is itself a string of the stream's line.
    const inner = JSON.stringify({ password: secret }).replace(/[<>&]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    const line = JSON.stringify({ detail: `value ${inner}` }).replace(/[<>&]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    expect(line).toContain('pa\\\\u003css');
    expect(r.text(line)).not.toContain('word-42');
    // Parsed once, the value still holds the document with Go's escapes: scrubbed there too.
    expect(r.value(JSON.parse(line))).toEqual({ detail: `value {"password":"${REDACTED}"}` });
  });
});
