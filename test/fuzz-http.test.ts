import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';
import { seededRandom } from './support/seeded-random.ts';

// Issue #12: a seeded, bounded fuzz over every route the app serves, as admin, tenant and
// anonymous. No answer may be a 5xx, and a refused request (4xx) must leave every table as it was.
const REQUESTS = 3000;
const SEED = 0x5eed12;
const DEADLINE_MS = 50_000;

let h: Harness;
let ids: { tenantId: string; clusterId: string; machineId: string; runId: string };
let tenantToken: string;
beforeAll(async () => {
  h = await createHarness({ app: { authLimit: { maxFailures: 1_000_000 } } });
  const seeded = await seedCluster(h, 'fuzz');
  const m = await h.call('POST', `/v1/clusters/${seeded.clusterId}/machines`, { body: { name: 'cp1', role: 'controlplane', address: '2001:db8::10' } });
  tenantToken = (await h.call('POST', `/v1/tenants/${seeded.tenantId}/tokens`, { body: { name: 'fz' } })).body.token;
  const run = await h.call('POST', '/v1/collect');
  ids = { ...seeded, machineId: m.body.id, runId: run.body.run.id };
});
afterAll(async () => h?.close());

async function digest(): Promise<string> {
  const db = h.deps.database.client;
  const tables = (await db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")).rows.map((r) => String(r.name));
  const hash = createHash('sha256');
  for (const t of tables) hash.update(t).update(JSON.stringify((await db.execute(`SELECT * FROM "${t}" ORDER BY rowid`)).rows));
  return hash.digest('hex');
}

describe('HTTP fuzz', () => {
  it(`${REQUESTS} seeded requests over every route: no 5xx, refused requests change nothing`, async () => {
    const rand = seededRandom(SEED);
    const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const routes = h.app.routes.filter((r) => r.method !== 'ALL' && !r.path.includes('*'));
    expect(routes.length).toBeGreaterThan(40);
    const junk = ['', 'x', '..%2f..%2fetc%2fpasswd', '%00', 'a'.repeat(300), '0', '-1', 'tn_aaaaaaaaaaaaaaaa', 'cl_zzzzzzzzzzzzzzzz', '💥', "'; DROP TABLE runs;--"];
    const param = (name: string) =>
      rand() < 0.5 ? pick(junk) : ({ tenant: ids.tenantId, id: pick([ids.clusterId, ids.runId]), cluster: ids.clusterId, mid: ids.machineId, provider: pick(['hetzner', 'aws', 'nope']) } as Record<string, string>)[name] ?? pick(junk);
    let deep = '1';
    for (let i = 0; i < 900; i++) deep = `{"a":${deep}}`;
    const bodies: Array<() => [string | undefined, string | undefined]> = [
      () => [undefined, undefined],
      () => ['{"cluster": ', 'application/json'],
      () => [deep, 'application/json'],
      () => [JSON.stringify({ name: pick(junk), tenant: pick([ids.tenantId, 'x']), role: pick(['worker', 'x']), patches: [pick(['{a: [', 'machine: {}', deep])], env: { [pick(['TF_LOG', 'HCLOUD_TOKEN', 'LD_PRELOAD'])]: 'x' } }), 'application/json'],
      () => [JSON.stringify(pick([null, [], 1, 'x', true, {}])), 'application/json'],
      () => ['--B\r\nContent-Disposition: form-data; name="_csrf"\r\n\r\nx\r\n--', 'multipart/form-data; boundary=B'],
      () => ['token=x&_csrf=y&name=%ZZ', 'application/x-www-form-urlencoded'],
      () => ['\u0000\uffff'.repeat(50), pick(['text/plain', 'application/json', 'application/octet-stream'])],
      () => [JSON.stringify({ version: 4, serial: rand() * 10, lineage: 'x', resources: [] }), 'application/json'],
    ];
    const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'LOCK', 'UNLOCK'];
    const statuses: Record<number, number> = {};
    const fivexx: string[] = [];
    const changedOnRefusal: string[] = [];
    let before = await digest();
    const started = Date.now();
    let sent = 0;
    for (; sent < REQUESTS && Date.now() - started < DEADLINE_MS; sent++) {
      const route = pick(routes);
      const method = rand() < 0.8 ? route.method : pick(methods);
      let path = route.path.replace(/:([A-Za-z]+)(\{[^}]*\})?/g, (_m, n: string) => encodeURIComponent(param(n)));
      if (rand() < 0.3) path += `?${pick(['since', 'cluster', 'version', 'ID', 'limit', 'mode'])}=${encodeURIComponent(pick(junk))}`;
      const who = pick(['admin', 'tenant', 'anon', 'bogus']);
      const headers: Record<string, string> = {};
      if (who === 'admin') headers.authorization = `Bearer ${h.adminToken}`;
      if (who === 'tenant') headers.authorization = `Bearer ${tenantToken}`;
      if (who === 'bogus') headers.authorization = pick(['Bearer x', 'Basic !!!', 'Basic ' + Buffer.from('run_x:y').toString('base64'), 'Digest a']);
      if (rand() < 0.1) headers['x-ingress-path'] = pick(['/api/hassio_ingress/x', '../', '']);
      if (rand() < 0.1) headers['x-rezus-signature'] = 'v1=' + '0'.repeat(64);
      const [body, type] = ['GET', 'HEAD'].includes(method) ? [undefined, undefined] : pick(bodies)();
      if (type) headers['content-type'] = type;
      const ctl = new AbortController();
      let status: number;
      try {
        const res = await h.app.request(path, { method, headers, body, signal: ctl.signal });
        status = res.status;
        // Event streams stay open: read a little, then hang up.
        const reading = res.text().catch(() => '');
        const timer = new Promise((r) => setTimeout(r, 300));
        await Promise.race([reading, timer]);
        ctl.abort();
      } catch (err) {
        fivexx.push(`${method} ${path}: threw ${String(err)}`);
        continue;
      }
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (status >= 500) fivexx.push(`${method} ${path} as ${who} (${type ?? 'no body'}) → ${status}`);
      const after = await digest();
      if (status >= 400 && after !== before) changedOnRefusal.push(`${method} ${path} as ${who} → ${status}`);
      before = after;
    }
    console.log(`fuzz: seed ${SEED.toString(16)}, ${routes.length} routes, ${sent} requests in ${Date.now() - started} ms, statuses ${JSON.stringify(statuses)}, 5xx ${fivexx.length}, db changed on refusal ${changedOnRefusal.length}`);
    expect(sent).toBeGreaterThan(1000);
    expect(fivexx).toEqual([]);
    expect(changedOnRefusal).toEqual([]);
  }, 90_000);
});
