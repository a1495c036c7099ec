// The edge's refusals without workerd: which requests the Worker sends home, and its sealer.
import { describe, expect, it } from 'vitest';
import { homeOnly } from '../functions/edge/routes.ts';
import { refusingSealer, RUNS_AT_HOME } from '../functions/edge/refuse.ts';
import { edgeDeps } from '../functions/edge/deps.ts';
import { DomainError } from '../lib/errors.ts';
import { loadConfig } from '../runner/config.ts';

describe('the edge', () => {
  it('sends master-key, key-generation and tofu work home and serves the rest', () => {
    expect(homeOnly('POST', '/v1/clusters')).toBeDefined();
    expect(homeOnly('GET', '/v1/clusters/cl_x/talosconfig')).toBeDefined();
    expect(homeOnly('GET', '/v1/clusters/cl_x/machines/m_1/config')).toBeDefined();
    expect(homeOnly('POST', '/v1/state/tn_x/cl_x/lock')).toBeDefined();
    expect(homeOnly('POST', '/v1/tenants/tn_x/webhook-secret')).toBeDefined();
    expect(homeOnly('GET', '/login')?.what).toMatch(/dashboard/);
    for (const [m, p] of [
      ['POST', '/v1/hooks/tn_x/provision'],
      ['GET', '/v1/clusters'],
      ['GET', '/v1/clusters/cl_x'],
      ['DELETE', '/v1/clusters/cl_x'],
      ['GET', '/v1/runs/run_1/events'],
      ['POST', '/v1/runs/run_1/cancel'],
      ['POST', '/v1/clusters/cl_x/provision'],
      ['GET', '/healthz'],
    ] as const) {
      expect(homeOnly(m, p), `${m} ${p}`).toBeUndefined();
    }
  });

  it('has no master key: its sealer refuses with runs_at_home, and so does cluster key generation', async () => {
    for (const op of [() => refusingSealer.seal('x', 'c'), () => refusingSealer.openText('v1:AAAA', 'c')]) {
      try {
        op();
        expect.unreachable();
      } catch (err) {
        expect(err).toBeInstanceOf(DomainError);
        expect((err as DomainError).code).toBe(RUNS_AT_HOME);
      }
    }
    const deps = edgeDeps({ REZUS_DB_URL: 'http://127.0.0.1:9', REZUS_EDGE_KEY: Buffer.alloc(32, 7).toString('base64') });
    await expect(deps.newClusterSecrets()).rejects.toMatchObject({ code: RUNS_AT_HOME });
    // The edge key opens only what it sealed itself.
    const sealed = deps.webhookSealer!.seal('whsec_x', 'webhook:tn_a');
    expect(deps.webhookSealer!.openText(sealed, 'webhook:tn_a')).toBe('whsec_x');
    expect(() => deps.webhookSealer!.openText(sealed, 'webhook:tn_b')).toThrow();
  });

  it('lets the home runner take the edge key from REZUS_EDGE_KEY', () => {
    expect(loadConfig({ REZUS_EDGE_KEY: 'k'.repeat(44) }).edgeKey).toBe('k'.repeat(44));
    expect(loadConfig({}).edgeKey).toBeUndefined();
  });
});
