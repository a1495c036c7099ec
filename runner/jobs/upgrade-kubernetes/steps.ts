// The steps of a Kubernetes upgrade, how each is known to be done (read from Kubernetes, so a new
// run skips what an earlier one finished), and how one is carried out on its node.
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { RunError } from '../../../lib/jobs/executor.ts';
import type { RunEventInput } from '../../../lib/jobs/types.ts';
import type { KubeWriter } from '../../../lib/kube/drain.ts';
import { pauseBeforeNextRead, retryAfterOf } from '../../../lib/kube/errors.ts';
import { errorMessage } from '../../../lib/errors.ts';
import type { UpgradeTimings } from '../../../functions/settings.ts';
import { componentsAfterStep, configImage, stepConfig } from '../../../functions/upgrade/kubernetes-plan.ts';
import type { K8sComponent } from '../../../lib/talos/k8s-images.ts';
import type { ClusterAccess } from '../cluster-access.ts';
import type { Db } from '../../../db/client.ts';
import { markDelivered } from '../../../lib/mesh/store.ts';
import { machines } from '../../../db/schema/index.ts';
import { eq } from 'drizzle-orm';
import { kubeNode, kubeProxy, setKubeProxyImage, staticPod } from './kube.ts';

export interface Target {
  id: string;
  name: string;
  role: 'controlplane' | 'worker';
  address: string;
  /** The machine's config as the node runs it (the cluster's version, and what an earlier run moved), and at the target. */
  oldConfig: string;
  newConfig: string;
  /** What its config carries at another version than the cluster's (machines.kubernetesComponents). */
  components: Record<string, string> | null;
  /** The mesh hub endpoint the configs dial (null off the mesh); recorded once a config is applied. */
  meshEndpoint: string | null;
}

export type Step =
  | { kind: 'static-pod'; component: K8sComponent; machine: Target; image: string }
  | { kind: 'kube-proxy'; component: 'kube-proxy'; controlPlanes: Target[]; image: string }
  | { kind: 'kubelet'; component: 'kubelet'; machine: Target; image: string };

export const stepLabel = (s: Step): string => (s.kind === 'kube-proxy' ? 'kube-proxy' : `${s.component} on ${s.machine.name}`);

export interface StepContext {
  db: Db;
  access: ClusterAccess;
  kube: KubeWriter;
  timings: UpgradeTimings;
  /** `1.37.0` */
  version: string;
  /** Aborted when the run must stop at once; a cancel lets the step in flight finish. */
  hard: AbortSignal;
  emit(event: RunEventInput): Promise<void>;
}

/** Every step in `talosctl upgrade-k8s` order: each static pod across the control planes, kube-proxy, then each node's kubelet. */
export function planSteps(controlPlanes: Target[], workers: Target[], components: readonly K8sComponent[]): Step[] {
  const steps: Step[] = [];
  const imageFor = (m: Target, c: K8sComponent): string => {
    const image = configImage(m.newConfig, c);
    if (!image) throw new RunError(`${m.name}: the rendered config names no image for ${c}`);
    return image;
  };
  for (const component of components) {
    if (component === 'kube-proxy') {
      const first = controlPlanes[0];
      if (first) steps.push({ kind: 'kube-proxy', component, controlPlanes, image: imageFor(first, component) });
    } else if (component === 'kubelet') {
      for (const m of [...controlPlanes, ...workers]) steps.push({ kind: 'kubelet', component, machine: m, image: imageFor(m, component) });
    } else {
      for (const m of controlPlanes) steps.push({ kind: 'static-pod', component, machine: m, image: imageFor(m, component) });
    }
  }
  return steps;
}

/** What keeps a step from being done, read now from Kubernetes; undefined once it is done. */
export async function pendingReason(ctx: StepContext, step: Step): Promise<string | undefined> {
  const { kube, hard: signal } = ctx;
  if (step.kind === 'static-pod') {
    const pod = await staticPod(kube, step.component, step.machine.name, signal);
    if (!pod) return `no ${step.component} pod on ${step.machine.name}`;
    if (pod.image !== step.image) return `pod ${pod.name} runs ${pod.image ?? 'no image'}`;
    return pod.ready ? undefined : `pod ${pod.name} runs ${step.image} but is not Ready`;
  }
  if (step.kind === 'kubelet') {
    const node = await kubeNode(kube, step.machine.name, signal);
    if (!node) return `node ${step.machine.name} is not registered`;
    if (node.kubeletVersion !== `v${ctx.version}`) return `node ${step.machine.name} reports kubelet ${node.kubeletVersion || 'unknown'}`;
    return node.ready ? undefined : `node ${step.machine.name} runs kubelet v${ctx.version} but is NotReady`;
  }
  const ds = await kubeProxy(kube, signal);
  // Without the DaemonSet nothing tells whether the configs carry the new image: push them again.
  if (!ds) return 'no kube-proxy DaemonSet';
  if (ds.image !== step.image) return `kube-proxy DaemonSet runs ${ds.image ?? 'no image'}`;
  return ds.rolledOut ? undefined : `kube-proxy rollout: ${ds.updated}/${ds.desired} updated, ${ds.available} available`;
}

/** The machine's config with every component up to and including `upTo` on the new version, without a reboot. */
async function applyStepConfig(ctx: StepContext, m: Target, upTo: K8sComponent, step: string): Promise<void> {
  const data = Buffer.from(stepConfig(m.oldConfig, m.newConfig, upTo));
  // Recorded before the apply: should the run stop between the two, a push then renders the
  // component at the new version (where this step was taking it), never back to the old one.
  m.components = componentsAfterStep(m.components, upTo, ctx.version);
  await ctx.db.update(machines).set({ kubernetesComponents: m.components }).where(eq(machines.id, m.id));
  const client = await ctx.access.talosClient(m.address);
  try {
    const applied = await client.applyConfiguration({ data, mode: 'no-reboot' }, { deadlineMs: ctx.timings.callDeadlineMs, signal: ctx.hard });
    await markDelivered(ctx.db, m.id, m.meshEndpoint);
    await ctx.emit({
      type: 'k8s.apply',
      message: `${m.name}: config with ${upTo} on ${ctx.version} applied without a reboot`,
      data: { step, node: m.name, component: upTo, mode: applied.mode, sha256: createHash('sha256').update(data).digest('hex') },
    });
  } catch (err) {
    ctx.hard.throwIfAborted();
    throw new RunError(`${m.name}: applying the config for ${upTo} failed: ${errorMessage(err)}`, { node: m.name, component: upTo });
  } finally {
    client.close();
  }
}

/**
 * Polls until the step reads as done. Kubernetes API failures are expected here (the apiserver
 * being replaced is the one answering), so only the timeout ends the wait, naming the last reason.
 */
async function waitDone(ctx: StepContext, step: Step, what: string): Promise<void> {
  const { timings, hard } = ctx;
  const deadline = performance.now() + timings.gateTimeoutMs;
  let last: string;
  for (;;) {
    hard.throwIfAborted();
    // A throttled or restarting apiserver may ask to be left alone for a while (Retry-After).
    let asked = 0;
    try {
      const reason = await pendingReason(ctx, step);
      if (reason === undefined) return;
      last = reason;
    } catch (err) {
      hard.throwIfAborted();
      last = errorMessage(err);
      asked = retryAfterOf(err);
    }
    if (performance.now() >= deadline) {
      throw new RunError(`${what} did not become ready on ${ctx.version} within ${Math.round(timings.gateTimeoutMs / 1000)}s: ${last}`, {
        step: stepLabel(step),
        component: step.component,
        ...(step.kind === 'kube-proxy' ? {} : { node: step.machine.name }),
      });
    }
    await sleep(pauseBeforeNextRead(timings.pollMs, asked, deadline - performance.now()), undefined, { signal: hard });
  }
}

export async function runStep(ctx: StepContext, step: Step): Promise<void> {
  const label = stepLabel(step);
  if (step.kind !== 'kube-proxy') {
    await applyStepConfig(ctx, step.machine, step.component, label);
    await ctx.emit({ type: 'k8s.wait', message: `${label}: waiting for ${step.image} to run and be Ready`, data: { step: label, node: step.machine.name, component: step.component } });
    await waitDone(ctx, step, `${step.machine.name}: ${step.component}`);
    return;
  }
  for (const cp of step.controlPlanes) await applyStepConfig(ctx, cp, 'kube-proxy', label);
  const ds = await kubeProxy(ctx.kube, ctx.hard).catch((err: unknown) => {
    ctx.hard.throwIfAborted();
    throw new RunError(`kube-proxy: cannot read its DaemonSet: ${errorMessage(err)}`, { component: 'kube-proxy' });
  });
  if (!ds) {
    await ctx.emit({ level: 'warn', type: 'k8s.wait', message: 'kube-proxy: the cluster has no kube-proxy DaemonSet; only the configs carry the new image', data: { step: label, component: 'kube-proxy' } });
    return;
  }
  if (ds.image !== step.image) {
    try {
      await setKubeProxyImage(ctx.kube, step.image, ctx.hard);
    } catch (err) {
      ctx.hard.throwIfAborted();
      throw new RunError(`kube-proxy: updating its DaemonSet failed: ${errorMessage(err)}`, { component: 'kube-proxy' });
    }
  }
  await ctx.emit({ type: 'k8s.wait', message: `kube-proxy: waiting for the DaemonSet to roll out ${step.image}`, data: { step: label, component: 'kube-proxy' } });
  await waitDone(ctx, step, 'kube-proxy');
}
