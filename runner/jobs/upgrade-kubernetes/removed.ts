// Before any node moves: refuse an upgrade into a Kubernetes minor that removed a flag, feature gate
// or admission plugin the configs it would push still set, or an API the cluster still has objects of.
import { RunError } from '../../../lib/jobs/executor.ts';
import { removedByUpgrade, removedRefusal, removedUsesByMachine, removesNothing, resourceListPath } from '../../../lib/talos/k8s-removed.ts';
import { parseDocuments } from '../../../functions/upgrade/kubernetes-plan.ts';
import { countObjects, readKubeState } from './kube.ts';
import type { StepContext, Target } from './steps.ts';

export async function checkRemoved(ctx: StepContext, from: string, targets: Target[]): Promise<void> {
  const gone = removedByUpgrade(from, ctx.version);
  if (gone && removesNothing(gone)) return;
  if (!gone) {
    await ctx.emit({
      level: 'warn',
      type: 'k8s.check',
      message: `RezusCloud does not know what Kubernetes ${ctx.version} removes: its flags, feature gates and APIs were not checked`,
      data: { checked: false },
    });
    return;
  }
  const problems = removedUsesByMachine(targets.map((t) => ({ name: t.name, role: t.role, documents: parseDocuments(t.newConfig) })), gone);
  for (const resource of gone.resources) {
    const count = await readKubeState(ctx.hard, () => countObjects(ctx.kube, resourceListPath(resource), ctx.hard));
    if (count) problems.push(`${count} ${resource} object${count === 1 ? '' : 's'}`);
  }
  if (problems.length) throw new RunError(`refusing to upgrade to ${ctx.version}: ${removedRefusal(ctx.version, problems)}`, { problems });
  await ctx.emit({
    type: 'k8s.check',
    message: `nothing Kubernetes ${ctx.version} removes is in use: ${gone.featureGates.length} feature gates, ${Object.values(gone.flags).flat().length} flags, ${gone.admissionPlugins.length} admission plugins and ${gone.resources.length} APIs checked`,
    data: { checked: true },
  });
}
