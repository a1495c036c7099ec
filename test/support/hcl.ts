// Reads the modules' HCL as JSON (hcl2json, the HCL library compiled to wasm: no network).
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from '@cdktf/hcl2json';
import type { ModuleVariable, VariableType } from '../../lib/cloud/module-variables.ts';

export const MODULES_ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'modules');
export const CLOUD_MODULES = ['oci', 'openstack', 'hetzner', 'aws'] as const;

/** One parsed block: attributes, or arrays of nested blocks. */
export type HclBlock = Record<string, unknown>;

export interface ParsedModule {
  terraform?: HclBlock[];
  variable?: Record<string, HclBlock[]>;
  locals?: HclBlock[];
  resource?: Record<string, Record<string, HclBlock[]>>;
  data?: Record<string, Record<string, HclBlock[]>>;
  output?: Record<string, HclBlock[]>;
  provider?: Record<string, HclBlock[]>;
}

export async function parseModule(name: string): Promise<ParsedModule> {
  const dir = path.join(MODULES_ROOT, name);
  const files = (await readdir(dir)).filter((f) => f.endsWith('.tf')).sort();
  const merged: Record<string, unknown> = {};
  for (const f of files) {
    const doc = (await parse(f, await readFile(path.join(dir, f), 'utf8'))) as Record<string, unknown>;
    for (const [k, v] of Object.entries(doc)) {
      if (Array.isArray(v)) merged[k] = [...((merged[k] as unknown[]) ?? []), ...v];
      else merged[k] = { ...((merged[k] as object) ?? {}), ...(v as object) };
    }
  }
  return merged as ParsedModule;
}

/** `${string}` → `string`: hcl2json wraps expressions in a template. */
export function expression(v: unknown): string {
  const s = String(v);
  return s.startsWith('${') && s.endsWith('}') ? s.slice(2, -1) : s;
}

const TYPES: VariableType[] = ['string', 'number', 'bool', 'list(string)', 'list(number)', 'map(string)'];

/** The settings a module takes: every variable except the two RezusCloud sets itself. */
export function moduleVariables(mod: ParsedModule): Record<string, ModuleVariable> {
  const out: Record<string, ModuleVariable> = {};
  for (const [name, [block]] of Object.entries(mod.variable ?? {}).sort(([a], [b]) => a.localeCompare(b))) {
    if (name === 'cluster_name' || name === 'machines' || !block) continue;
    const type = expression(block.type).replace(/\s+/g, '') as VariableType;
    if (!TYPES.includes(type)) throw new Error(`variable ${name}: type ${type} has no providerSettings mapping`);
    out[name] = { type, required: !('default' in block) };
  }
  return out;
}

/** The TypeScript source of lib/cloud/module-variables.ts for the modules as they are now. */
export async function renderModuleVariables(): Promise<string> {
  const lines = [
    '// GENERATED from modules/*/main.tf by test/module-variables.test.ts (UPDATE_MODULE_VARIABLES=1 rewrites it).',
    '// Portable: the HTTP handlers check providerSettings against it without reading the .tf files.',
    '',
    "export type VariableType = 'string' | 'number' | 'bool' | 'list(string)' | 'list(number)' | 'map(string)';",
    '',
    'export interface ModuleVariable {',
    '  type: VariableType;',
    '  /** No default: tofu stops with "No value for required variable" unless it is set. */',
    '  required: boolean;',
    '}',
    '',
    'export const MODULE_VARIABLES: Record<string, Record<string, ModuleVariable>> = {',
  ];
  for (const name of [...CLOUD_MODULES, 'local'].sort()) {
    lines.push(`  ${name}: {`);
    for (const [v, spec] of Object.entries(moduleVariables(await parseModule(name)))) {
      lines.push(`    ${v}: { type: '${spec.type}', required: ${spec.required} },`);
    }
    lines.push('  },');
  }
  lines.push('};', '');
  return lines.join('\n');
}
