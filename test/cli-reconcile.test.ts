import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { ApiClient } from '../cli/client.ts';
import { CliError, EXIT } from '../cli/exit.ts';
import { executeReconcile, pendingChanges, planReconcile, renderPlan, type ReconcilePlan } from '../cli/reconcile.ts';
import { parseSpecFile, type ClusterDocument } from '../cli/spec.ts';
import { createHarness, type Harness } from './support/harness.ts';
import { listen } from './support/serve.ts';

// The reconciler's rules against the real API on a loopback listener (in-process app, real
// database): what a left-out field means, pruning, immutable fields, several documents per file.

let h: Harness;
let server: Awaited<ReturnType<typeof listen>>;
let api: ApiClient;

beforeAll(async () => {
  h = await createHarness();
  server = await listen(h);
  api = new ApiClient(server.url, h.adminToken);
});
afterAll(async () => {
  await server.close();
  await h.close();
});

const doc = (name: string, spec: Record<string, unknown>) =>
  stringify({ apiVersion: 'rezus.cloud/v1', kind: 'Cluster', metadata: { name, tenant: 'home' }, spec: { endpoint: 'https://[2001:db8::1]:6443', ...spec } });

async function apply(text: string, prune = false): Promise<ReconcilePlan[]> {
  const plans: ReconcilePlan[] = [];
  for (const d of parseSpecFile(text, 'test.yaml')) {
    const plan = await planReconcile(api, d, { prune });
    if (pendingChanges(plan).length) await executeReconcile(api, plan);
    plans.push(plan);
  }
  return plans;
}
const actions = (p: ReconcilePlan) => p.changes.filter((c) => c.action !== 'unchanged').map((c) => `${c.action} ${c.kind} ${c.name}${c.fields ? ` ${c.fields.join(',')}` : ''}`);

describe('apply -f reconciliation', () => {
  it('creates every cluster of a multi-document file, and a second pass finds nothing to do', async () => {
    const text = [
      doc('alpha', { machines: [{ name: 'cp1', role: 'controlplane', provider: 'metal', address: '2001:db8::21' }] }),
      doc('beta', { kubernetesVersion: 'v1.35.0', machines: [{ name: 'cp1', role: 'controlplane', provider: 'local' }] }),
    ].join('---\n');
    const first = await apply(text);
    expect(first.map(actions)).toEqual([
      ['create tenant home', 'create cluster alpha', 'create machine cp1'],
      // The tenant exists by the time the second document is planned.
      ['create cluster beta', 'create machine cp1'],
    ]);
    const second = await apply(text);
    expect(second.map(actions)).toEqual([[], []]);
    const beta = (await h.call('GET', '/v1/clusters')).body.clusters.find((c: { name: string }) => c.name === 'beta');
    expect(beta.kubernetesVersion).toBe('1.35.0');
  });

  it('settings with a server default keep their value when left out; patches and provider settings are the file\'s', async () => {
    // beta runs Kubernetes 1.35.0 (set above); this file does not say, so it stays.
    const withPatch = doc('beta', {
      patches: [{ cluster: { proxy: { disabled: true } } }],
      providerSettings: { local: { apply_delay_seconds: 1 } },
      installerImage: null,
      machines: [{ name: 'cp1', role: 'controlplane', provider: 'local' }],
    });
    const [changed] = await apply(withPatch);
    expect(actions(changed!)).toEqual(['update cluster beta patches,providerSettings']);
    expect(renderPlan(changed!)).toMatch(/^~ cluster beta\n/);

    const [dropped] = await apply(doc('beta', { machines: [{ name: 'cp1', role: 'controlplane', provider: 'local' }] }));
    expect(actions(dropped!)).toEqual(['update cluster beta patches,providerSettings']);
    const beta = (await h.call('GET', '/v1/clusters')).body.clusters.find((c: { name: string }) => c.name === 'beta');
    expect(beta).toMatchObject({ kubernetesVersion: '1.35.0', settings: { patches: [], providerSettings: {} } });
  });

  it('keeps machines the file leaves out unless --prune, and then deletes them', async () => {
    const text = doc('alpha', { machines: [{ name: 'w1', role: 'worker', provider: 'metal', address: '2001:db8::22' }] });
    const [kept] = await apply(text);
    expect(actions(kept!)).toEqual(['create machine w1', 'kept machine cp1']);
    expect(renderPlan(kept!)).toContain('! machine alpha/cp1: not in the file, kept (--prune deletes it)');
    const alphaId = kept!.cluster!.id;
    expect((await h.call('GET', `/v1/clusters/${alphaId}/machines`)).body.machines.map((m: { name: string }) => m.name)).toEqual(['cp1', 'w1']);

    const [pruned] = await apply(text, true);
    expect(actions(pruned!)).toEqual(['delete machine cp1']);
    expect((await h.call('GET', `/v1/clusters/${alphaId}/machines`)).body.machines.map((m: { name: string }) => m.name)).toEqual(['w1']);
  });

  it('refuses a changed role or provider before changing anything, and only warns about the Talos version', async () => {
    const text = doc('alpha', {
      talosVersion: 'v1.14.0',
      patches: [{ cluster: { proxy: { disabled: true } } }],
      machines: [{ name: 'w1', role: 'controlplane', provider: 'metal', address: '2001:db8::22' }],
    });
    const err = await apply(text).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).exitCode).toBe(EXIT.usage);
    expect((err as CliError).message).toContain('machine w1: role is worker, the file says controlplane');
    // The cluster patch in the same file was not applied either.
    const alpha = (await h.call('GET', '/v1/clusters')).body.clusters.find((c: { name: string }) => c.name === 'alpha');
    expect(alpha.settings.patches).toEqual([]);

    const plan = await planReconcile(api, parseSpecFile(text.replace('role: controlplane', 'role: worker'), 't')[0] as ClusterDocument, { prune: false });
    expect(plan.warnings.join()).toContain('runs Talos v1.13.9, the file says v1.14.0');
    expect(actions(plan)).toEqual(['update cluster alpha patches']);
  });

  it('names the document and the path of a spec that does not parse', () => {
    const good = doc('gamma', {});
    expect(() => parseSpecFile(`${good}---\n${good.replace('rezus.cloud/v1', 'v2')}`, 'f.yaml')).toThrow(/f\.yaml \(document 2\): apiVersion: /);
    expect(() => parseSpecFile(doc('gamma', { endpoint: 'http://x' }), 'f.yaml')).toThrow(/f\.yaml: spec\.endpoint: must be https:\/\/host:port/);
    expect(() => parseSpecFile(doc('gamma', { machines: [{ name: 'a', role: 'worker', provider: 'local' }, { name: 'a', role: 'worker', provider: 'local' }] }), 'f.yaml')).toThrow(
      /machine names must be unique/,
    );
  });
});
