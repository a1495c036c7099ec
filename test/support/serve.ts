import { serve, type ServerType } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import type { Harness } from './harness.ts';

/** Puts the harness app on a real loopback listener, so child processes (tofu) can reach it. */
export async function listen(h: Harness): Promise<{ url: string; close(): Promise<void> }> {
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: h.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  h.deps.settings.tofu.selfUrl = url;
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
