import { describe, expect, it } from 'vitest';
import { parseTofuLine, toRunEvent, UnsupportedUiVersionError } from '../lib/tofu/messages.ts';
import type { TofuMessage } from '../lib/tofu/messages.ts';
import { Redactor, REDACTED } from '../lib/tofu/redact.ts';

const res = (addr: string) => ({
  addr,
  module: '',
  resource: addr,
  implied_provider: 'terraform',
  resource_type: 'terraform_data',
  resource_name: 'machine',
  resource_key: 'cp-1',
});
const base = { '@level': 'info', '@module': 'tofu.ui', '@timestamp': '2026-01-01T00:00:00Z' };
const line = (o: object) => JSON.stringify({ ...base, ...o });
const parse = (o: object) => parseTofuLine(line(o)) as TofuMessage;

describe('parseTofuLine', () => {
  it('ignores lines that are not UI messages', () => {
    expect(parseTofuLine('Initializing the backend...')).toBeUndefined();
    expect(parseTofuLine('{not json')).toBeUndefined();
    expect(parseTofuLine('[1,2]')).toBeUndefined();
    expect(parseTofuLine('{"no":"type"}')).toBeUndefined();
  });

  it('accepts UI version 1.x from OpenTofu and Terraform', () => {
    expect(parse({ type: 'version', tofu: '1.9.0', ui: '1.2', '@message': 'OpenTofu 1.9.0' }).type).toBe('version');
    expect(parse({ type: 'version', terraform: '1.11.4', ui: '1.0' }).type).toBe('version');
  });

  it('rejects an unknown major UI version', () => {
    expect(() => parse({ type: 'version', tofu: '2.0.0', ui: '2.0' })).toThrow(UnsupportedUiVersionError);
    expect(() => parse({ type: 'version', tofu: '2.0.0' })).toThrow(/\(missing\)/);
  });

  it('keeps unknown message types and shows their @message', () => {
    const m = parse({ type: 'ephemeral_op_start', '@message': 'ephemeral.x: Opening...', hook: {} });
    const e = toRunEvent(m);
    expect(e).toEqual({ level: 'info', type: 'tofu.ephemeral_op_start', message: 'ephemeral.x: Opening...' });
  });
});

describe('toRunEvent', () => {
  it('maps a planned change and a change summary', () => {
    const pc = toRunEvent(
      parse({
        type: 'planned_change',
        '@message': 'terraform_data.machine["cp-1"]: Plan to replace',
        change: { resource: res('terraform_data.machine["cp-1"]'), action: 'replace', reason: 'tainted' },
      }),
    );
    expect(pc).toEqual({
      level: 'info',
      type: 'tofu.planned_change',
      message: 'terraform_data.machine["cp-1"]: Plan to replace',
      data: { address: 'terraform_data.machine["cp-1"]', action: 'replace', reason: 'tainted' },
    });
    const cs = toRunEvent(
      parse({ type: 'change_summary', changes: { add: 1, change: 2, import: 0, remove: 3, forget: 0, operation: 'plan' } }),
    );
    expect(cs.data).toEqual({ add: 1, change: 2, import: 0, remove: 3, forget: 0, operation: 'plan' });
  });

  it('reports the flavor from the version message', () => {
    expect(toRunEvent(parse({ type: 'version', tofu: '1.9.0', ui: '1.2' })).data).toMatchObject({ flavor: 'tofu', version: '1.9.0' });
    expect(toRunEvent(parse({ type: 'version', terraform: '1.11.4', ui: '1.2' })).data).toMatchObject({ flavor: 'terraform' });
  });

  it('withholds provisioner output', () => {
    const e = toRunEvent(
      parse({
        type: 'provision_progress',
        '@message': 'terraform_data.machine["cp-1"]: (local-exec): token=abc123',
        hook: { resource: res('terraform_data.machine["cp-1"]'), provisioner: 'local-exec', output: 'token=abc123' },
      }),
    );
    expect(JSON.stringify(e)).not.toContain('abc123');
    expect(e.message).toBe('terraform_data.machine["cp-1"]: (local-exec) output withheld');
  });

  it('drops sensitive output values and keeps the others', () => {
    const e = toRunEvent(
      parse({
        type: 'outputs',
        outputs: {
          machines: { sensitive: false, type: 'string', value: { a: { ipv4: '192.0.2.10', ipv6: null } } },
          talosconfig: { sensitive: true, type: 'string', value: 'PRIVATE-KEY-MATERIAL' },
        },
      }),
    );
    expect(JSON.stringify(e)).not.toContain('PRIVATE-KEY-MATERIAL');
    expect(e.data).toEqual({
      outputs: { machines: { sensitive: false, value: { a: { ipv4: '192.0.2.10', ipv6: null } } }, talosconfig: { sensitive: true } },
    });
  });

  it('maps diagnostics to levels without their snippet or provisioner output', () => {
    const e = toRunEvent(
      parse({
        type: 'diagnostic',
        '@level': 'error',
        '@message': 'Error: local-exec provisioner error',
        diagnostic: {
          severity: 'error',
          summary: 'local-exec provisioner error',
          detail: "Error running command 'x': exit status 1. Output: hunter2-secret-line",
          address: 'terraform_data.machine["a"]',
          range: { filename: 'main.tf', start: { line: 4, column: 1, byte: 0 }, end: { line: 4, column: 9, byte: 8 } },
          snippet: { code: 'x', values: [{ traversal: 'var.password', statement: 'is "hunter2-in-snippet"' }] },
        },
      }),
    );
    const s = JSON.stringify(e);
    expect(s).not.toContain('hunter2');
    expect(e.level).toBe('error');
    expect(e.data).toMatchObject({ summary: 'local-exec provisioner error', file: 'main.tf', line: 4 });
    const warn = toRunEvent(parse({ type: 'diagnostic', '@level': 'warn', diagnostic: { severity: 'warning', summary: 'w', detail: '' } }));
    expect(warn.level).toBe('warn');
  });

  it('scrubs a long diagnostic before it bounds it: a secret across the cut leaves no part of itself', () => {
    const secret = 'hcloud-TOKEN-0123456789abcdefghij';
    const detail = `${'x'.repeat(1977)} token ${secret} rejected`;
    const e = toRunEvent(parse({ type: 'diagnostic', '@level': 'error', diagnostic: { severity: 'error', summary: 'bad token', detail } }), { secrets: [secret] });
    const shown = String((e.data as { detail: string }).detail);
    expect(shown).not.toContain('hcloud-TOKEN');
    expect(shown.endsWith('…')).toBe(true);
  });

  it('scrubs secrets, their base64 and JSON-escaped forms, and lines of multi-line secrets', () => {
    const config = 'version: v1alpha1\nmachine:\n  token: abcdefghijklmnop.0123456789abcdef\n';
    const secrets = ['fake-cloud-credential-42', config];
    const b64 = Buffer.from('fake-cloud-credential-42').toString('base64');
    const msgs = [
      parse({ type: 'log', '@message': 'auth with fake-cloud-credential-42 failed' }),
      parse({ type: 'log', '@message': `metadata ${b64}` }),
      parse({ type: 'log', '@message': `value "${JSON.stringify(config).slice(1, -1)}"` }),
      parse({ type: 'log', '@message': 'saw token: abcdefghijklmnop.0123456789abcdef' }),
      parse({ type: 'outputs', outputs: { o: { sensitive: false, value: { nested: ['x fake-cloud-credential-42 y'] } } } }),
    ];
    const redactor = new Redactor(secrets);
    const out = msgs.map((m) => toRunEvent(m, { redactor }));
    const s = JSON.stringify(out);
    expect(s).not.toContain('fake-cloud-credential-42');
    expect(s).not.toContain(b64);
    expect(s).not.toContain('abcdefghijklmnop.0123456789abcdef');
    expect(out[0]?.message).toBe(`auth with ${REDACTED} failed`);
    // Options without a prebuilt redactor scrub as well.
    expect(toRunEvent(msgs[0]!, { secrets }).message).toBe(`auth with ${REDACTED} failed`);
  });
});
