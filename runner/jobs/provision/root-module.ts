import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { copyTree } from '../../../lib/tofu/copy-tree.ts';

export const MODULES_ROOT = fileURLToPath(new URL('../../../modules', import.meta.url));
import type { CloudProvider, ProviderSettings, SettingValue } from '../../../functions/provision/providers.ts';

export { CLOUD_PROVIDERS, type CloudProvider, type ProviderSettings } from '../../../functions/provision/providers.ts';

/**
 * `${` and `%{` start templates in .tf.json strings, which tofu evaluates on this host (`file()`
 * reads any file it can): a tenant's settings must stay literals, so both are doubled. A function
 * replaces, since in a replacement string `$$` is one `$`.
 */
const escapeTemplates = (s: string): string => s.replace(/\$\{/g, () => '$${').replace(/%\{/g, () => '%%{');
function literal(v: SettingValue): SettingValue {
  if (typeof v === 'string') return escapeTemplates(v);
  if (Array.isArray(v)) return v.map((s) => escapeTemplates(s));
  // A map's keys cannot hold a template (the API takes only label-like keys); its values can.
  if (typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, escapeTemplates(x)]));
  return v;
}

/**
 * One root module per cluster that calls the module of each provider the cluster uses, so the
 * whole cluster lives in one state (one lock, one version history) even when it spans clouds.
 * Written as JSON so setting values need no HCL quoting.
 */
export function composeRootModule(providers: CloudProvider[], settings: ProviderSettings): Record<string, unknown> {
  const variable: Record<string, unknown> = { cluster_name: { type: 'string' } };
  const module: Record<string, unknown> = {};
  for (const p of providers) {
    variable[`machines_${p}`] = { type: 'any', sensitive: true };
    const extra = Object.fromEntries(Object.entries(settings[p] ?? {}).map(([k, v]) => [k, literal(v)]));
    module[p] = { ...extra, source: `./providers/${p}`, cluster_name: '${var.cluster_name}', machines: `\${var.machines_${p}}` };
  }
  const outputs = providers.map((p) => `module.${p}.machines`);
  return {
    variable,
    ...(providers.length ? { module } : {}),
    output: { machines: { value: providers.length ? `\${merge(${outputs.join(', ')})}` : {} } },
  };
}

/** Lays out the root module in a directory (replaced whole each run). */
export async function writeRootModule(dir: string, providers: CloudProvider[], settings: ProviderSettings): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(join(dir, 'providers'), { recursive: true, mode: 0o700 });
  await Promise.all(providers.map((p) => copyTree(join(MODULES_ROOT, p), join(dir, 'providers', p))));
  await writeFile(join(dir, 'main.tf.json'), JSON.stringify(composeRootModule(providers, settings), null, 2) + '\n');
}
