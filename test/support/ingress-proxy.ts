import { createServer, request, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Stands in for the Home Assistant Supervisor's ingress proxy on loopback: strips the ingress
 * path, adds X-Ingress-Path, and streams the answer back (SSE included).
 */
export async function startIngressProxy(target: string, ingressPath: string) {
  const upstream = new URL(target);
  const server = createServer((req, res) => {
    const url = req.url ?? '/';
    if (url !== ingressPath && !url.startsWith(`${ingressPath}/`) && !url.startsWith(`${ingressPath}?`)) {
      res.writeHead(404).end('not an ingress path');
      return;
    }
    const rest = url.slice(ingressPath.length) || '/';
    const headers: IncomingHttpHeaders = { ...req.headers, host: upstream.host, 'x-ingress-path': ingressPath };
    const out = request(
      { hostname: upstream.hostname, port: upstream.port, path: rest.startsWith('/') ? rest : `/${rest}`, method: req.method, headers, timeout: 20_000 },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    out.on('timeout', () => out.destroy(new Error('upstream timeout')));
    out.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    res.on('close', () => out.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${ingressPath}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
