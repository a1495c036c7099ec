// Pre-pulls the images of the steps still to do, so each component's restart is not also a
// download: control-plane and kube-proxy images into the CRI namespace pods run from, the kubelet
// into the system namespace (as talosctl upgrade-k8s).
import pLimit from 'p-limit';
import { RunError } from '../../../lib/jobs/executor.ts';
import { isUnimplemented } from '../../../lib/talos/api/index.ts';
import { errorMessage } from '../../../lib/errors.ts';
import type { Step, StepContext, Target } from './steps.ts';

interface Pull {
  image: string;
  namespace: 'cri' | 'system';
}

/** Per machine, the images its pending steps need, without repeats. */
export function pullsFor(pending: Step[], all: Target[]): Map<Target, Pull[]> {
  const out = new Map<Target, Pull[]>();
  const add = (m: Target, p: Pull): void => {
    const list = out.get(m) ?? [];
    if (!list.some((x) => x.image === p.image && x.namespace === p.namespace)) list.push(p);
    out.set(m, list);
  };
  for (const s of pending) {
    if (s.kind === 'static-pod') add(s.machine, { image: s.image, namespace: 'cri' });
    // kube-proxy runs on every node.
    else if (s.kind === 'kube-proxy') for (const m of all) add(m, { image: s.image, namespace: 'cri' });
    else add(s.machine, { image: s.image, namespace: 'system' });
  }
  return out;
}

async function pullOn(ctx: StepContext, m: Target, pulls: Pull[]): Promise<void> {
  const client = await ctx.access.talosClient(m.address);
  try {
    for (const p of pulls) {
      await ctx.emit({ type: 'k8s.pull', message: `${m.name}: pre-pulling ${p.image}`, data: { node: m.name, image: p.image, namespace: p.namespace } });
      try {
        await client.imagePull({ image: p.image, namespace: p.namespace }, { deadlineMs: ctx.timings.installDeadlineMs, signal: ctx.hard });
      } catch (err) {
        ctx.hard.throwIfAborted();
        if (isUnimplemented(err)) {
          // Talos before v1.13 has no ImageService: the kubelet pulls when the component restarts.
          await ctx.emit({ level: 'warn', type: 'k8s.pull', message: `${m.name}: no ImageService on this node; images are pulled at restart`, data: { node: m.name } });
          return;
        }
        throw new RunError(`${m.name}: pre-pulling ${p.image} failed: ${errorMessage(err)}`, { node: m.name, image: p.image });
      }
    }
  } finally {
    client.close();
  }
}

/** Pulls on every machine at once (up to the read concurrency), each machine's images in turn. */
export async function prePull(ctx: StepContext, pulls: Map<Target, Pull[]>): Promise<void> {
  const limit = pLimit(ctx.timings.readConcurrency);
  await Promise.all([...pulls].map(([m, images]) => limit(() => pullOn(ctx, m, images))));
}
