// Whether each node runs the config RezusCloud renders for it now. `talosctl upgrade-k8s` patches
// the config a node runs; RezusCloud pushes its own render instead, so a patch or setting changed
// since the node's last push (or an edit made on the node) would go out with the first step.
import { isDeepStrictEqual } from 'node:util';
import { parse } from 'yaml';
import { parseDocuments } from '../../../functions/upgrade/kubernetes-plan.ts';
import { RunError } from '../../../lib/jobs/executor.ts';
import { errorMessage } from '../../../lib/errors.ts';
import { componentImage, K8S_COMPONENTS, setComponentImage } from '../../../lib/talos/k8s-images.ts';
import type { ConfigDocument } from '../../../lib/talos/patch.ts';
import { documentLabel, isV1Alpha1 } from '../../../lib/talos/schema.ts';
import type { StepContext, Target } from './steps.ts';

/** The config a node runs (Talos's MachineConfig resource, Sensitive: an admin certificate reads it). */
const MACHINE_CONFIG = { namespace: 'config', type: 'MachineConfigs.config.talos.dev', id: 'v1alpha1' } as const;

/** The resource's spec marshals to the config's bytes as applied, so yaml_spec is one YAML string holding them. */
export function runningConfigText(yamlSpec: string): string | undefined {
  const text: unknown = parse(yamlSpec);
  return typeof text === 'string' ? text : undefined;
}

function documentsOf(text: string): ConfigDocument[] {
  // An empty document (a trailing `---`) is no document to Talos either.
  const out = parseDocuments(text).filter((d: unknown) => d !== null && typeof d === 'object' && !Array.isArray(d));
  // The images the upgrade itself moves, step by step and across a resumed run, are not a pending change.
  for (const c of K8S_COMPONENTS) if (componentImage(out, c) !== undefined) setComponentImage(out, c, '(upgraded)');
  // Nor is the installer image: a Talos upgrade moves the render's tag but pushes no config (nor
  // does talosctl's), and the image only matters to the next install, which the push brings up to date.
  const install = (out.find(isV1Alpha1)?.['machine'] as { install?: Record<string, unknown> } | undefined)?.install;
  if (install && 'image' in install) install['image'] = '(installer)';
  return out;
}

/**
 * The documents (`v1alpha1`, `LinkConfig/eth1`) that differ between the two configs, apart from
 * the Kubernetes images and the installer image; never their contents, which hold keys.
 */
export function differingDocuments(running: string, rendered: string): string[] {
  const a = new Map(documentsOf(running).map((d) => [documentLabel(d), d]));
  const b = new Map(documentsOf(rendered).map((d) => [documentLabel(d), d]));
  return [...new Set([...a.keys(), ...b.keys()])].filter((k) => !isDeepStrictEqual(a.get(k), b.get(k))).sort();
}

async function pendingOf(ctx: StepContext, m: Target): Promise<string[]> {
  const resources = await ctx.access.withTalos(m.address, (c) =>
    c.listResources({ namespace: MACHINE_CONFIG.namespace, type: MACHINE_CONFIG.type }, { deadlineMs: ctx.timings.callDeadlineMs, signal: ctx.hard }),
  );
  const active = resources.find((r) => r.id === MACHINE_CONFIG.id);
  const text = active && runningConfigText(active.yamlSpec);
  if (text === undefined) throw new Error('the node shows no running config');
  return differingDocuments(text, m.oldConfig);
}

/**
 * Stops the run before its first step when a node it will push to runs another config than
 * RezusCloud renders for it, unless `include` (then a warning names them). A config it cannot read
 * counts the same: the push would overwrite whatever it is.
 */
export async function checkPendingConfig(ctx: StepContext, targets: Target[], include: boolean): Promise<void> {
  const found = (
    await Promise.all(
      targets.map(async (m) => {
        try {
          const docs = await pendingOf(ctx, m);
          return docs.length ? `${m.name} (${docs.join(', ')})` : undefined;
        } catch (err) {
          ctx.hard.throwIfAborted();
          return `${m.name} (its running config cannot be read: ${errorMessage(err)})`;
        }
      }),
    )
  ).filter((x): x is string => x !== undefined);
  if (found.length === 0) return;
  const what = `these nodes run another config than RezusCloud renders for them now, apart from the upgrade's images: ${found.join('; ')}; each step pushes the whole render, so those changes would go with it`;
  if (!include) {
    throw new RunError(`refusing to upgrade Kubernetes: ${what}. Push them first (POST /v1/clusters/:id/push-config for bare metal), or start the upgrade with includePendingConfig: true`, { nodes: found });
  }
  await ctx.emit({ level: 'warn', type: 'k8s.precheck', message: `includePendingConfig: upgrading anyway; ${what}`, data: { nodes: found } });
}
