import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import { parseAllDocuments } from 'yaml';
// Precompiled from config.schema.json (scripts/gen-talos-validators.ts): no code is generated at
// run time, which workerd refuses and which cost the runner a slow first validation.
import { byDef, kindToDef } from './schema/validators.js';

export interface SchemaIssue {
  /** dotted path inside the document, prefixed with the document when there is more than one (e.g. `HostnameConfig.auto`) */
  path: string;
  message: string;
}

const V1ALPHA1_DEF = 'v1alpha1.Config';

function validatorFor(def: string): ValidateFunction {
  const fn = byDef[def];
  if (!fn) throw new Error(`schema definition ${def} missing`);
  return fn;
}

function pointerToPath(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function joinPath(parts: string[]): string {
  return parts.map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

function describe(error: ErrorObject): { parts: string[]; message: string } {
  const parts = pointerToPath(error.instancePath);
  switch (error.keyword) {
    case 'additionalProperties':
      return { parts: [...parts, String(error.params.additionalProperty)], message: 'unknown field' };
    case 'required':
      return { parts: [...parts, String(error.params.missingProperty)], message: 'is required' };
    case 'enum':
      return { parts, message: `must be one of ${(error.params.allowedValues as unknown[]).map(String).join(', ')}` };
    default:
      // ajv's own messages name the rule (type, pattern, format), never the value
      return { parts, message: error.message ?? 'is invalid' };
  }
}

export function isV1Alpha1(doc: Record<string, unknown>): boolean {
  return doc.kind === undefined && ['version', 'machine', 'cluster', 'debug', 'persist'].some((k) => k in doc);
}

/** The document as Talos would label it in errors: `v1alpha1`, `HostnameConfig`, `WireguardConfig/wg0`. */
export function documentLabel(doc: Record<string, unknown>): string {
  if (isV1Alpha1(doc)) return 'v1alpha1';
  const kind = typeof doc.kind === 'string' ? doc.kind : '(no kind)';
  return typeof doc.name === 'string' ? `${kind}/${doc.name}` : kind;
}

/** Validates one parsed document; paths are relative to the document. */
export function validateDocument(doc: unknown): SchemaIssue[] {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    return [{ path: '(document)', message: 'must be a mapping' }];
  }
  const record = doc as Record<string, unknown>;
  let def: string;
  let subject: Record<string, unknown> = record;
  if (isV1Alpha1(record)) {
    def = V1ALPHA1_DEF;
    // Upstream writes `persist: true` although its schema omits it; Talos rejects only `false`.
    if ('persist' in record) {
      if (record.persist !== true) return [{ path: 'persist', message: 'must be true' }];
      subject = Object.fromEntries(Object.entries(record).filter(([k]) => k !== 'persist'));
    }
  } else {
    if (typeof record.apiVersion !== 'string') return [{ path: 'apiVersion', message: 'is required' }];
    if (typeof record.kind !== 'string') return [{ path: 'kind', message: 'is required' }];
    const found = Object.hasOwn(kindToDef, record.kind) ? kindToDef[record.kind] : undefined;
    if (!found) return [{ path: 'kind', message: 'is not a known Talos document kind' }];
    def = found;
  }
  const validate = validatorFor(def);
  if (validate(subject)) return [];
  const seen = new Set<string>();
  const issues: SchemaIssue[] = [];
  for (const error of validate.errors ?? []) {
    const { parts, message } = describe(error);
    const path = joinPath(parts) || '(document)';
    const key = `${path}\0${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push({ path, message });
  }
  return issues;
}

/** Validates parsed documents; with several documents, each path starts with its document's label. */
export function validateDocuments(docs: unknown[]): SchemaIssue[] {
  const issues: SchemaIssue[] = [];
  for (const doc of docs) {
    const label =
      typeof doc === 'object' && doc !== null && !Array.isArray(doc) ? documentLabel(doc as Record<string, unknown>) : '(document)';
    for (const issue of validateDocument(doc)) {
      const path = issue.path === '(document)' ? label : `${label}.${issue.path}`;
      issues.push(label === 'v1alpha1' ? issue : { path, message: issue.message });
    }
  }
  return issues;
}

/** Validates each document of a multi-document YAML machine config against the v1.13.9 schema. */
export function validateConfigDocuments(yamlText: string): SchemaIssue[] {
  const parsed = parseAllDocuments(yamlText);
  if (!Array.isArray(parsed)) return [{ path: '(yaml)', message: 'no documents' }];
  const issues: SchemaIssue[] = [];
  const docs: unknown[] = [];
  parsed.forEach((doc, index) => {
    const first = doc.errors[0];
    // The YAML library's message quotes the offending source line, which may hold key material.
    if (first) issues.push({ path: `(document ${index + 1})`, message: `invalid YAML (${first.code}) at line ${first.linePos?.[0].line ?? '?'}` });
    else docs.push(doc.toJS({ maxAliasCount: 0 }));
  });
  if (issues.length > 0) return issues;
  return validateDocuments(docs.filter((d) => d !== null && d !== undefined));
}
