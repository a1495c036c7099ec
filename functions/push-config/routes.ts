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
import { checkRenders } from '../machine-config/render.ts';
import { openClusterSecrets } from '../machine-config/secrets.ts';
import { accepted, enqueueClusterRun } from '../runs/enqueue.ts';
import { bootstrapJob, pushClusterJob, pushConfigJob, type BootstrapParams, type PushClusterParams, type PushConfigParams } from './job.ts';
import { mayBeInMaintenance, readyForBootstrap } from './machine-state.ts';

export const pushBody = z.strictObject({
  insecure: z.boolean().optional(),
  certFingerprint: z.string().max(200).optional(),
  mode: z.enum(['auto', 'reboot', 'no-reboot', 'staged', 'try']).optional(),
  dryRun: z.boolean().optional(),
});

export const clusterPushBody = z.strictObject({
  machines: z.array(z.strictObject({ id: z.union([idParam, dnsLabel]), certFingerprint: z.string().max(200).optional() })).min(1).max(500).optional(),
  insecure: z.boolean().optional(),
  bootstrap: z.boolean().optional(),
  concurrency: z.number().int().min(1).max(128).optional(),
});

/** Enough for a rack pushed at once; each push mostly waits for its node to install and reboot. */
const DEFAULT_PUSH_CONCURRENCY = 64;

function checkFingerprint(fp: string, label: string): void {
  try {
    parseFingerprint(fp);
  } catch (err) {
    if (err instanceof InvalidFingerprintError) throw new ApiError(400, 'invalid_request', `${label}: ${err.message}`);
    throw err;
  }
}

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
    checkRenders(cluster, machine, openClusterSecrets(c.var.deps, cluster));
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

  app.post('/:id/push-config', requireScope('write'), async (c) => {
    const cluster = await loadCluster(c, c.req.param('id'));
    const body = await readOptionalJson(c, clusterPushBody);
    // Ordered by the database, as the bootstrap route orders them (names are lowercase DNS labels):
    // localeCompare would load ICU's collator on its first use, 15 ms of a runner's first push.
    const rows = await c.var.deps.db.select().from(machines).where(eq(machines.clusterId, cluster.id)).orderBy(machines.name);
    let targets: Array<{ row: MachineRow; certFingerprint?: string }>;
    if (body.machines) {
      const seen = new Set<string>();
      targets = body.machines.map((want, i) => {
        const row = rows.find((r) => r.id === want.id) ?? rows.find((r) => r.name === want.id);
        if (!row) throw new ApiError(400, 'invalid_request', `machines[${i}]: no machine ${want.id} in this cluster`);
        if (seen.has(row.id)) throw new ApiError(400, 'invalid_request', `machines[${i}]: ${row.name} is named twice`);
        seen.add(row.id);
        if (row.provider !== 'metal') throw new ApiError(409, 'not_metal', `${row.name} is a ${row.provider} machine; only metal machines are pushed`);
        if (want.certFingerprint !== undefined) checkFingerprint(want.certFingerprint, `machines[${i}].certFingerprint`);
        return { row, ...(want.certFingerprint !== undefined ? { certFingerprint: want.certFingerprint.trim() } : {}) };
      });
    } else {
      targets = rows.filter((r) => r.provider === 'metal').map((row) => ({ row }));
      if (targets.length === 0) throw new ApiError(409, 'no_metal', 'the cluster has no metal machines to push');
    }
    for (const t of targets) requireAddress(t.row);
    const insecure = body.insecure === true;
    const maintenance = targets.filter((t) => mayBeInMaintenance(t.row)).map((t) => t.row.name);
    if (maintenance.length && !insecure) {
      throw new ApiError(400, 'insecure_required', `${maintenance.join(', ')} have no config yet (maintenance mode, no certificate this cluster trusts): say insecure: true, with a certFingerprint per machine from its console, to push over unauthenticated TLS`);
    }
    for (const t of targets) {
      if (t.certFingerprint !== undefined && !mayBeInMaintenance(t.row)) throw new ApiError(400, 'invalid_request', `${t.row.name}: certFingerprint only applies to a machine in maintenance mode`);
    }
    let bootstrap: string | undefined;
    if (body.bootstrap) {
      if (cluster.bootstrappedAt !== null) throw new ApiError(409, 'already_bootstrapped', 'the cluster is already bootstrapped; drop bootstrap');
      const first = rows.find((r) => r.role === 'controlplane');
      if (!first || !targets.some((t) => t.row.id === first.id)) {
        throw new ApiError(400, 'invalid_request', 'bootstrap: the first control plane must be among the machines pushed');
      }
      bootstrap = first.id;
    }
    const secrets = openClusterSecrets(c.var.deps, cluster);
    for (const t of targets) checkRenders(cluster, t.row, secrets);
    const params: PushClusterParams = {
      machines: targets.map((t) => ({ id: t.row.id, insecure: insecure && mayBeInMaintenance(t.row), ...(t.certFingerprint ? { certFingerprint: t.certFingerprint } : {}) })),
      concurrency: body.concurrency ?? DEFAULT_PUSH_CONCURRENCY,
      ...(bootstrap ? { bootstrap } : {}),
    };
    const run = await enqueueClusterRun(c.var.deps, cluster, pushClusterJob, params, c.var.principal.tokenId);
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
