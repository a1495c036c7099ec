// Every route module but the probes, mounted into the app by createApp (functions/app.ts) on the
// first request no probe answers, or when the runner asks (mountRoutesNow): importing and
// constructing them (their zod schemas, the dashboard, the OpenAPI document) was a large part of
// the runner's start, and a probe needs none.
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { etcdSnapshotRoutes } from './etcd/routes.ts';
import { requireAuth } from './auth.ts';
import { ApiError } from '../lib/http/errors.ts';
import { auditRoutes } from './audit/routes.ts';
import { backupRoutes } from './backup/routes.ts';
import type { AppEnv } from './context.ts';
import { dashboardRoutes } from './dashboard/routes.tsx';
import { collectRoutes, healthRoutes } from './collect/routes.ts';
import { clusterRoutes } from './inventory/clusters.ts';
import { machineRoutes } from './inventory/machines.ts';
import { machineConfigRoutes } from './machine-config/routes.ts';
import { manifestRoutes } from './manifests/routes.ts';
import { meshRoutes } from './mesh/routes.ts';
import { tenantRoutes } from './inventory/tenants.ts';
import { openApiDocument } from './openapi/document.ts';
import pkg from '../package.json' with { type: 'json' };
import { providerCredentialRoutes } from './providers/routes.ts';
import { runRoutes } from './runs/routes.ts';
import { approveRoutes, provisionHookRoutes, provisionRoutes } from './provision/routes.ts';
import { pushConfigRoutes } from './push-config/routes.ts';
import { stateBackendRoutes } from './state/backend.ts';
import { upgradeRoutes } from './upgrade/routes.ts';
import { upgradeKubernetesRoutes } from './upgrade/kubernetes-routes.ts';
import { clusterStateRoutes } from './state/cluster-routes.ts';
import { webhookSecretRoutes } from './webhooks/secret.ts';
import type { AppOptions } from './app.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

const apiBodyLimit = () =>
  bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => {
      throw new ApiError(413, 'body_too_large', `request body exceeds ${MAX_BODY_BYTES} bytes`);
    },
  });

/** Adds the API, the state backend, the webhooks and the dashboard to `app`, in this order. */
export function mountRoutes(app: Hono<AppEnv>, opts: AppOptions): void {
  const v1 = new Hono<AppEnv>();
  v1.use(apiBodyLimit());
  v1.use(requireAuth);
  v1.route('/tenants', tenantRoutes());
  v1.route('/tenants', providerCredentialRoutes());
  v1.route('/tenants', webhookSecretRoutes());
  v1.route('/clusters', clusterRoutes());
  v1.route('/clusters', machineRoutes());
  v1.route('/clusters', machineConfigRoutes());
  v1.route('/clusters', clusterStateRoutes());
  v1.route('/clusters', provisionRoutes());
  v1.route('/clusters', healthRoutes());
  v1.route('/collect', collectRoutes());
  v1.route('/clusters', pushConfigRoutes());
  v1.route('/clusters', upgradeRoutes());
  v1.route('/clusters', upgradeKubernetesRoutes());
  v1.route('/clusters', etcdSnapshotRoutes());
  v1.route('/clusters', manifestRoutes());
  v1.route('/clusters', meshRoutes());
  v1.route('/runs', runRoutes());
  v1.route('/runs', approveRoutes());
  v1.route('/audit', auditRoutes());
  v1.route('/backups', backupRoutes());

  app.get('/openapi.json', (c) => c.json(openApiDocument(pkg.version)));
  // Mounted before /v1 so tofu's requests meet the state backend's own body limit and basic
  // auth: the first matching handler answers, and the /v1 middleware below never runs for them.
  app.route('/v1/state', stateBackendRoutes());
  // Webhooks authenticate by signature, not bearer token.
  const hooks = new Hono<AppEnv>();
  hooks.use(apiBodyLimit());
  hooks.route('/', provisionHookRoutes());
  app.route('/v1/hooks', hooks);
  app.route('/v1', v1);
  // The dashboard reaches the API through the app itself, so both run the same handlers.
  app.route('/', dashboardRoutes((req, env) => app.fetch(req, env), opts.dashboard));
}
