// The floor of bench/runner.ts: a bare node:http server that answers /readyz, started the way the
// runner is, so the ratio shows what the runner's own start-up and idle memory add.
import { createServer } from 'node:http';
import process from 'node:process';

createServer((req, res) => {
  res.writeHead(req.url === '/readyz' ? 200 : 404, { 'content-type': 'text/plain' });
  res.end(req.url === '/readyz' ? 'ok\n' : '');
}).listen(Number(process.env.REZUS_PORT), process.env.REZUS_HOST);
