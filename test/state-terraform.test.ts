import { serve, type ServerType } from '@hono/node-server';
import { execa } from 'execa';
import { mkdir, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintStateCredential } from '../functions/state/credentials.ts';
import { createHarness, seedCluster, type Harness } from './support/harness.ts';
import { basic, lockInfo, stateClient } from './support/state.ts';

// Real terraform against the real backend on a loopback listener: the protocol as tofu speaks it.
const TF = process.env.REZUS_TOFU_BIN ?? 'terraform';
const MODULE = `
terraform {
  backend "http" {}
}
variable "n" {
  type = number
}
resource "terraform_data" "marker" {
  input = "marker-v\${var.n}"
}
output "marker" {
  value = terraform_data.marker.output
}
`;

let h: Harness;
let server: ServerType;
let base: string;
let ids: { tenantId: string; clusterId: string };
let work: string;
let env: Record<string, string>;
const seen: string[] = [];

beforeAll(async () => {
  h = await createHarness();
  ids = await seedCluster(h, 'tf');
  server = await new Promise<ServerType>((resolve) => {
    const s = serve(
      {
        fetch: (req: Request) => {
          const url = new URL(req.url);
          seen.push(`${req.method} ${url.searchParams.has('ID') ? 'with-id' : 'no-id'}`);
          return h.app.fetch(req);
        },
        port: 0,
        hostname: '127.0.0.1',
      },
      () => resolve(s),
    );
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  work = join(h.dir, 'module');
  await mkdir(join(h.dir, 'plugins'), { recursive: true });
  await mkdir(work);
  await writeFile(join(work, 'main.tf'), MODULE);
  await writeFile(join(h.dir, 'terraformrc'), '');
  const cred = await mintStateCredential(h.deps, { runId: 'run_tf', ...ids, ttlMs: 10 * 60_000 });
  env = {
    TF_HTTP_USERNAME: cred.username,
    TF_HTTP_PASSWORD: cred.password,
    TF_PLUGIN_CACHE_DIR: join(h.dir, 'plugins'),
    TF_CLI_CONFIG_FILE: join(h.dir, 'terraformrc'),
    TF_DATA_DIR: join(h.dir, 'tfdata'),
    TF_IN_AUTOMATION: '1',
    CHECKPOINT_DISABLE: '1',
  };
  const address = `${base}/v1/state/${ids.tenantId}/${ids.clusterId}`;
  await tf([
    'init',
    '-input=false',
    `-backend-config=address=${address}`,
    `-backend-config=lock_address=${address}`,
    `-backend-config=unlock_address=${address}`,
    '-backend-config=lock_method=LOCK',
    '-backend-config=unlock_method=UNLOCK',
  ]);
}, 120_000);

afterAll(async () => {
  await new Promise<void>((resolve) => server?.close(() => resolve()));
  await h?.close();
});

function tf(args: string[], reject = true) {
  return execa(TF, [...args, '-no-color'], { cwd: work, env, reject, timeout: 90_000, forceKillAfterDelay: 2_000 });
}

const versions = async () => (await h.call('GET', `/v1/clusters/${ids.clusterId}/state/versions`)).body.versions as { version: number; serial: number; lineage: string }[];

describe('terraform against the http state backend', () => {
  it('applies twice: versions kept with rising serials, bodies sealed, writes made under the lock, lock released', async () => {
    await tf(['apply', '-auto-approve', '-input=false', '-var', 'n=1']);
    const afterFirst = await versions();
    expect(afterFirst.length).toBeGreaterThanOrEqual(1);

    seen.length = 0;
    await tf(['apply', '-auto-approve', '-input=false', '-var', 'n=2']);
    const all = (await versions()).reverse();
    expect(all.length).toBeGreaterThan(afterFirst.length);
    for (let i = 1; i < all.length; i++) expect(all[i]!.serial).toBeGreaterThan(all[i - 1]!.serial);
    expect(new Set(all.map((v) => v.lineage)).size).toBe(1);

    // The second apply read the first one's state (no new lineage), locked, wrote with ?ID=, unlocked.
    expect(seen).toContain('GET no-id');
    expect(seen).toContain('LOCK no-id');
    expect(seen).toContain('POST with-id');
    expect(seen).not.toContain('POST no-id');
    expect(seen).toContain('UNLOCK no-id');
    expect((await h.deps.database.client.execute('SELECT count(*) AS n FROM state_locks')).rows[0]!.n).toBe(0);

    const admin = stateClient(h, ids.tenantId, ids.clusterId, `Bearer ${h.adminToken}`);
    const current = JSON.parse((await admin.get()).text);
    expect(current.outputs.marker.value).toBe('marker-v2');
    expect(current.resources).toHaveLength(1);
    const first = JSON.parse((await admin.get(`?version=${all[0]!.version}`)).text);
    expect(first.outputs.marker.value).toBe('marker-v1');

    const raw = await h.deps.database.client.execute('SELECT body_sealed FROM state_versions');
    for (const r of raw.rows) expect(String(r.body_sealed)).not.toMatch(/marker-v|terraform_data|lineage/);
  });

  it('fails to apply while another holder has the lock, naming that lock, and changes nothing', async () => {
    const before = await versions();
    const other = await mintStateCredential(h.deps, { runId: 'run_other', ...ids, ttlMs: 60_000 });
    const s = stateClient(h, ids.tenantId, ids.clusterId, basic(other));
    const held = lockInfo('someone@elsewhere');
    expect((await s.lock(held)).status).toBe(200);

    const res = await tf(['apply', '-auto-approve', '-input=false', '-var', 'n=3'], false);
    expect(res.exitCode).not.toBe(0);
    expect(res.stderr).toMatch(/lock/i);
    expect(res.stderr).toContain(held.ID);
    expect(await versions()).toEqual(before);

    expect((await s.unlock(held)).status).toBe(200);
  });
});
