import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveTofuBinary } from '../lib/tofu/binary.ts';
import type { RunEvent, TofuMessage } from '../lib/tofu/messages.ts';
import { TofuWorkspace } from '../lib/tofu/workspace.ts';

// Issue #12 item 5: the executor passes `machines_<provider>` (the root module's variables);
// a module that forgets `sensitive = true` prints the configs, and the redactor must still
// scrub them from every event.
const root = await mkdtemp(path.join(tmpdir(), 'rezus-redact-'));
afterAll(() => rm(root, { recursive: true, force: true }));

const CA_KEY = 'LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUZha2VDYUtleU1hdGVyaWFs';
const userData = (n: string) => `version: v1alpha1\nmachine:\n  type: controlplane\n  ca:\n    key: ${CA_KEY}${n}\n  token: ${n}-bootstrap-token-abcdef012345\n`;

describe('tofu output never carries machine configs', () => {
  it('scrubs machines_<provider> user_data printed by a module without sensitive = true', async () => {
    const moduleDir = path.join(root, 'careless');
    await mkdir(moduleDir, { recursive: true });
    await writeFile(
      path.join(moduleDir, 'main.tf'),
      `variable "cluster_name" { type = string }
variable "machines_local" { type = map(object({ role = string, user_data = string })) }
resource "terraform_data" "m" {
  for_each = var.machines_local
  input    = each.value.user_data
}
output "leak" { value = var.machines_local }
`,
    );
    const binary = (await resolveTofuBinary({ env: { PATH: process.env.PATH ?? '' } })).path;
    const ws = new TofuWorkspace({
      binary,
      dataDir: path.join(root, 'data'),
      tenantId: 't1',
      clusterId: 'c1',
      moduleDir,
      backend: { kind: 'local', path: path.join(root, 'c1.tfstate') },
      pathEnv: process.env.PATH ?? '',
      timeoutMs: 60_000,
    });
    const vars = { cluster_name: 'home', machines_local: { 'cp-1': { role: 'controlplane', user_data: userData('cp-1') } } };
    const files = await ws.createRunFiles(vars);
    const events: RunEvent[] = [];
    const raw: TofuMessage[] = [];
    const hooks = { onEvent: (e: RunEvent) => events.push(e), onMessage: (m: TofuMessage) => raw.push(m) };
    await ws.init(hooks);
    const applied = await ws.applyVars({ ...hooks, varFile: files.varFile });
    await files.dispose();
    // The module really printed the config (otherwise the test proves nothing)…
    expect(JSON.stringify(raw)).toContain('cp-1-bootstrap-token-abcdef012345');
    expect(JSON.stringify(applied.outputs)).toContain('bootstrap-token');
    // …and not one event carries it, whole or in part.
    const logged = JSON.stringify(events);
    expect(events.length).toBeGreaterThan(3);
    expect(logged).not.toContain('bootstrap-token-abcdef012345');
    expect(logged).not.toContain(CA_KEY);
    expect(logged).toContain('[redacted]');
  }, 90_000);
});
