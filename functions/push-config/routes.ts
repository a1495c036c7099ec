import { and, eq } from 'drizzle-orm';
import { Hono, type Context } from 'hono';
import { z } from 'zod';
import { machines } from '../../db/schema/index.ts';
import { requireScope } from '../auth.ts';
import { ApiError, notFound } from '../../lib/http/errors.ts';
import { parseWith, readJson } from '../../lib/http/validate.ts';
import { InvalidFingerprintError, parseFingerprint } from '../../lib/talos/api/fingerprint.ts';
import type { AppEnv } from '../context.ts';
import { loadCluster, loadMachine, type MachineRow } from '../inventory/load.ts';
import { dnsLabel, idParam } from '../inventory/schemas.ts';
import { talosAddressOf } from '../machine-config/access.ts';
import { renderOrReject } from '../machine-config/render.ts';
import { openClusterSecrets } from '../machine-config/secrets.ts';
import { accepted, enqueueClusterRun } from '../runs/enqueue.ts';
import { bootstrapJob, pushConfigJob, type BootstrapParams, type PushConfigParams } from './job.ts';
import { mayBeInMaintenance, readyForBootstrap } from './machine-state.ts';

export const pushBody = z.strictObject({
  insecure: z.boolean().optional(),
  certFingerprint: z.string().max(200).optional(),
  mode: z.enum(['auto', 'reboot', 'no-reboot', 'staged', 'try']).optional(),
  dryRun: z.boolean().optional(),
});

export const bootstrapBody = z.strictObject({ machine: z.union([idParam, dnsLabel]).optional() });

/** Both bodies are all-optional, so an empty request means `{}`. */
async function readOptionalJson<S extends z.ZodType>(c: Context<AppEnv>, schema: S): Promise<z.output<S>> {
  if ((await c.req.text()).length === 0) return parseWith(schema, {});
  return readJson(c, schema);
}

function requireAddress(m: MachineRow): string {
  const address = talosAddressOf(m);
  if (!address) throw new ApiError(400, 'no_address', `${m.name} has no address to reach its Talos API; set one with PATCH …/machines/${m.id}`);
  return address;
}

export function pushConfigRoutes() {
  const app = new Hono<AppEnv>();

  app.post('/:id/machines/:mid/push-config', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const machine = await loadMachine(c, cluster, c.req.param('mid'));
    const body = await readOptionalJson(c, pushBody);
    if (machine.provider !== 'metal') {
      throw new ApiError(409, 'not_metal', `${machine.name} is a ${machine.provider} machine: it gets its config as user_data when provisioned; only metal machines are pushed`);
    }
    requireAddress(machine);
    const insecure = body.insecure === true;
    const mode = body.mode ?? 'auto';
    if (mayBeInMaintenance(machine)) {
      if (!insecure) {
        throw new ApiError(400, 'insecure_required', `${machine.name} has no config yet, so its node is in maintenance mode and has no certificate this cluster trusts: say insecure: true (with certFingerprint from the node console) to push over unauthenticated TLS`);
      }
      if (mode === 'staged' || mode === 'try') throw new ApiError(400, 'invalid_request', `mode: ${mode} needs a configured node; use auto, reboot or no-reboot`);
    } else {
      // Decided: refuse rather than quietly switch to mTLS, so a caller who believes the node is
      // in maintenance (e.g. it was wiped) learns that RezusCloud will not push to it unauthenticated.
      if (insecure) {
        throw new ApiError(409, 'machine_configured', `${machine.name} is ${machine.state}: it is only pushed over mTLS with the cluster's admin certificate; drop insecure (a node wiped back to maintenance must be deleted and added again)`);
      }
      if (body.certFingerprint !== undefined) throw new ApiError(400, 'invalid_request', 'certFingerprint: only applies to an insecure push');
    }
    if (body.certFingerprint !== undefined) {
      try {
        parseFingerprint(body.certFingerprint);
      } catch (err) {
        if (err instanceof InvalidFingerprintError) throw new ApiError(400, 'invalid_request', `certFingerprint: ${err.message}`);
        throw err;
      }
    }
    // A config that does not render fails here, not in the run.
    renderOrReject(cluster, machine, openClusterSecrets(c.var.deps, cluster));
    const params: PushConfigParams = {
      machine: machine.id,
      insecure,
      ...(body.certFingerprint !== undefined ? { certFingerprint: body.certFingerprint.trim() } : {}),
      mode,
      dryRun: body.dryRun === true,
    };
    const run = await enqueueClusterRun(c.var.deps, cluster, pushConfigJob, params, c.var.principal.tokenId);
    return accepted(c, run);
  });

  app.post('/:id/bootstrap', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = await readOptionalJson(c, bootstrapBody);
    if (cluster.bootstrappedAt !== null) {
      throw new ApiError(409, 'already_bootstrapped', `the cluster was bootstrapped at ${new Date(cluster.bootstrappedAt).toISOString()}; a second bootstrap is not sent`);
    }
    const { db } = c.var.deps;
    let target: MachineRow | undefined;
    if (body.machine !== undefined) {
      const named = body.machine;
      const byId = await db.select().from(machines).where(and(eq(machines.clusterId, cluster.id), eq(machines.id, named))).get();
      target = byId ?? (await db.select().from(machines).where(and(eq(machines.clusterId, cluster.id), eq(machines.name, named))).get());
      if (!target) throw notFound('machine');
      if (target.role !== 'controlplane') throw new ApiError(400, 'not_control_plane', `${target.name} is a worker; bootstrap runs on a control plane`);
    } else {
      target = await db
        .select()
        .from(machines)
        .where(and(eq(machines.clusterId, cluster.id), eq(machines.role, 'controlplane')))
        .orderBy(machines.name)
        .limit(1)
        .get();
      if (!target) throw new ApiError(409, 'no_control_plane', 'the cluster has no control plane machine');
    }
    if (!readyForBootstrap(target)) {
      throw new ApiError(409, 'not_configured', `${target.name} is ${target.state}: push its config first (or name another control plane with {machine})`);
    }
    requireAddress(target);
    const params: BootstrapParams = { machine: target.id };
    const run = await enqueueClusterRun(c.var.deps, cluster, bootstrapJob, params, c.var.principal.tokenId);
    return accepted(c, run);
  });

  return app;
}
