// Which requests the Worker refuses before they reach a handler, because the work needs the master
// key, RSA-4096 key generation beyond the Workers CPU budget, tofu or the Talos API (port 50000).
// Everything else is served by the same handlers as at home; a handler that still reaches for the
// master key meets the refusing sealer (functions/edge/refuse.ts) and answers the same 409.
import type { MiddlewareHandler } from 'hono';
import { ApiError, errorBody } from '../../lib/http/errors.ts';
import { RUNS_AT_HOME, runsAtHome } from './refuse.ts';

export interface HomeOnlyRoute {
  method: string;
  /** Matched against the path; `*` means any method. */
  path: RegExp;
  what: string;
}

const ID = '[^/]+';

export const HOME_ONLY: readonly HomeOnlyRoute[] = [
  { method: 'POST', path: /^\/v1\/clusters\/?$/, what: 'creating a cluster (RSA-4096 CA keys, sealed with the master key)' },
  { method: 'PATCH', path: new RegExp(`^/v1/clusters/${ID}/?$`), what: "changing a cluster (its configs are re-rendered with the cluster's secrets)" },
  { method: 'POST', path: new RegExp(`^/v1/clusters/${ID}/machines/?$`), what: "adding a machine (its config is rendered with the cluster's secrets)" },
  { method: 'PATCH', path: new RegExp(`^/v1/clusters/${ID}/machines/${ID}/?$`), what: "changing a machine (its config is rendered with the cluster's secrets)" },
  { method: 'GET', path: new RegExp(`^/v1/clusters/${ID}/(talosconfig|kubeconfig)/?$`), what: "rendering a client config (the cluster's CA keys)" },
  { method: 'GET', path: new RegExp(`^/v1/clusters/${ID}/machines/${ID}/config/?$`), what: "rendering a machine config (the cluster's secrets)" },
  { method: 'POST', path: new RegExp(`^/v1/clusters/${ID}/machines/${ID}/push-config/?$`), what: 'pushing a machine config (rendered with the cluster secrets, sent to port 50000)' },
  { method: 'PUT', path: new RegExp(`^/v1/tenants/${ID}/providers/${ID}/?$`), what: 'storing provider credentials (sealed with the master key)' },
  { method: 'POST', path: new RegExp(`^/v1/tenants/${ID}/webhook-secret/?$`), what: 'minting a webhook secret (sealed with the master key and the edge key)' },
  { method: '*', path: /^\/v1\/state(\/|$)/, what: 'the tofu state backend (state is sealed with the master key; tofu runs at home)' },
];

/** Paths the edge serves at all: the API, probes and the OpenAPI document. The dashboard's sessions are sealed with the master key. */
const EDGE_PATHS = /^\/(v1(\/|$)|healthz$|readyz$|metrics$|openapi\.json$)/;

export function homeOnly(method: string, path: string): HomeOnlyRoute | undefined {
  const found = HOME_ONLY.find((r) => (r.method === '*' || r.method === method) && r.path.test(path));
  if (found) return found;
  if (!EDGE_PATHS.test(path)) return { method: '*', path: /./, what: 'the dashboard (its sessions are sealed with the master key)' };
  return undefined;
}

/** Answers a home-only request with 409 `runs_at_home` and changes nothing. */
export const refuseHomeOnly: MiddlewareHandler = async (c, next) => {
  const route = homeOnly(c.req.method, c.req.path);
  if (!route) return next();
  const err = runsAtHome(route.what);
  return c.json(errorBody(new ApiError(409, RUNS_AT_HOME, err.message)), 409);
};
