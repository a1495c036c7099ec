import { getConnInfo } from '@hono/node-server/conninfo';
import type { RemoteAddressSource } from '../functions/dashboard/ingress.ts';

/** The socket's peer under @hono/node-server; undefined where there is no socket (app.request). */
export const nodeRemoteAddress: RemoteAddressSource = (c) => {
  try {
    return getConnInfo(c).remote.address;
  } catch {
    return undefined;
  }
};
